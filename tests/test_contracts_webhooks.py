"""Contracts of portal/webhooks that mutation testing found unguarded: what a stored event links to, and how
the hmac-sha256 scheme tells its refusals apart."""

import hashlib
import hmac
import json
import secrets
import uuid
from datetime import datetime, timezone

import pytest
from support import deliver_signed

from flow_sandbox.settings import DEMO_WEBHOOK_SECRET
from portal.extensions import db
from portal.models import RejectionTally, WebhookEvent
from portal.webhooks.schemes import verify_delivery
from portal.webhooks.signing import signed_headers


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


HMAC_SECRET = secrets.token_urlsafe(32)


def hmac_refusal(app, signature: str | None) -> tuple[int, str, str]:
    """Deliver an event under the hmac-sha256 scheme with `signature` (None: no header); status, kind, reason."""
    body = json.dumps({"id": str(uuid.uuid4()), "type": "flow.status_changed"}).encode()
    headers = {"content-type": "application/json"} | ({"X-Flow-Signature": signature} if signature else {})
    answer = app.test_client().post("/webhooks/flow", data=body, headers=headers)
    with app.app_context():
        tally = db.session.query(RejectionTally).order_by(RejectionTally.last_at.desc()).first()
        return answer.status_code, tally.kind if tally else "", tally.last_reason if tally else ""


def test_hmac_signatures_missing_malformed_or_wrong_are_told_apart(make_app):
    app = make_app(FLOW_WEBHOOK_SCHEME="hmac-sha256", FLOW_WEBHOOK_SECRETS=HMAC_SECRET)
    status, kind, reason = hmac_refusal(app, None)
    assert (status, kind, reason) == (401, "missing_header", "missing header X-Flow-Signature")
    status, kind, reason = hmac_refusal(app, "sha256=not-hex")
    assert (status, kind, reason) == (401, "malformed_signature", "X-Flow-Signature is not a hex SHA-256 digest")
    status, kind, reason = hmac_refusal(app, "sha256=" + "0" * 64)
    assert (status, kind, reason) == (401, "signature", "no secret matches the signature")


def test_an_hmac_signature_in_capitals_or_without_prefix_is_accepted(make_app):
    app = make_app(FLOW_WEBHOOK_SCHEME="hmac-sha256", FLOW_WEBHOOK_SECRETS=HMAC_SECRET)
    for prefix, case in (("sha256=", str.upper), ("", str.lower)):
        body = json.dumps({"id": str(uuid.uuid4()), "type": "flow.status_changed"}).encode()
        digest = case(hmac.new(HMAC_SECRET.encode(), body, hashlib.sha256).hexdigest())
        headers = {"content-type": "application/json", "X-Flow-Signature": f" {prefix}{digest} "}
        answer = app.test_client().post("/webhooks/flow", data=body, headers=headers)
        assert answer.status_code == 200 and answer.get_json()["status"] == "stored", answer.text


@pytest.mark.parametrize("scheme", ["standard-webhooks", "hmac-sha256"])
def test_what_the_portal_signs_its_own_receiver_accepts(scheme):
    """`flask events send-test` signs with signed_headers: the receiver's verify_delivery must accept it."""
    secret = DEMO_WEBHOOK_SECRET if scheme == "standard-webhooks" else HMAC_SECRET
    body = json.dumps({"id": "evt-signed", "type": "flow.status_changed"})
    headers = signed_headers(scheme, secret, "msg_1", datetime.now(timezone.utc), body, "X-Flow-Signature")
    if scheme == "hmac-sha256":
        assert list(headers) == ["X-Flow-Signature"] and headers["X-Flow-Signature"].startswith("sha256=")
    verified = verify_delivery(
        body.encode(), headers, scheme=scheme, secrets=("whsec_" + "A" * 32, secret), hmac_header="X-Flow-Signature"
    )
    assert (verified.scheme, verified.secret_index) == (scheme, 1)
