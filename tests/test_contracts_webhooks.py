"""Contracts of portal/webhooks that mutation testing found unguarded: what a stored event links to."""

import uuid
from datetime import datetime, timezone

from support import deliver_signed

from portal.extensions import db
from portal.models import WebhookEvent


def reference_only_event(reference: str, event_type: str) -> dict:
    """A delivery that names its flow by reference alone (some senders leave the flow id out)."""
    return {
        "id": str(uuid.uuid4()),
        "type": event_type,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "data": {"referenceId": reference, "status": "Opened", "previousStatus": "Unopened"},
    }


def test_an_event_naming_only_the_flows_reference_is_on_its_timeline(app, sandbox, signed_in):
    created = sandbox.create()
    flow_id, reference = created["flowId"], created["referenceId"]
    staff = signed_in("viewer")
    assert "flow.reminder_sent" not in staff.get(f"/flows/{flow_id}").text
    assert deliver_signed(app, reference_only_event(reference, "flow.reminder_sent")).status_code == 200
    with app.app_context():
        stored = db.session.query(WebhookEvent).one()
        assert (stored.flow_id, stored.reference_id) == (None, reference)
    page = staff.get(f"/flows/{flow_id}")
    assert page.status_code == 200
    assert "flow.reminder_sent" in page.text, "the event names the flow's reference, which no other flow has"
    assert f"/events/{stored.id}" in page.text
