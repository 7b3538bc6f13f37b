"""Regression tests for inputs that once ended in a 500."""

import json
import uuid
from datetime import datetime, timezone

import pytest
from standardwebhooks import Webhook

from portal.sandbox.settings import DEMO_WEBHOOK_SECRET


def deliver(client, body: dict):
    raw = json.dumps(body)
    message_id, moment = f"msg_{uuid.uuid4().hex}", datetime.now(timezone.utc)
    headers = {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": Webhook(DEMO_WEBHOOK_SECRET).sign(message_id, moment, raw),
        "content-type": "application/json",
    }
    return client.post("/webhooks/flow", data=raw, headers=headers)


@pytest.mark.parametrize(
    "timestamp", ["9999-12-31T23:59:59Z", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00"]
)
def test_an_event_at_the_ends_of_the_calendar_breaks_no_page(app, sandbox, signed_in, timestamp):
    flow = sandbox.create()
    event = {
        "id": str(uuid.uuid4()),
        "type": "flow.status_changed",
        "timestamp": timestamp,
        "data": {"flowId": flow["flowId"], "referenceId": flow["referenceId"], "status": "Opened"},
    }
    assert deliver(app.test_client(), event).status_code == 200
    staff = signed_in("operator")
    page = staff.get(f"/flows/{flow['flowId']}")
    assert page.status_code == 200 and "flow.status_changed" in page.text
    assert staff.post(f"/flows/{flow['flowId']}/reveal").status_code == 200
    events = staff.get(f"/events?flow={flow['flowId']}")
    assert events.status_code == 200
    row = events.text.split('href="/events/')[1].split('"')[0]
    assert staff.get(f"/events/{row}").status_code == 200
