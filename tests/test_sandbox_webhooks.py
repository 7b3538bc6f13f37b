"""The sandbox's webhook sender, verified with the `standardwebhooks` package."""

import json
import time

from standardwebhooks import Webhook
from support import wait_until

from flow_sandbox.settings import DEMO_WEBHOOK_SECRET


def verified_events(deliveries, secret=DEMO_WEBHOOK_SECRET):
    return [Webhook(secret).verify(delivery["body"], delivery["headers"]) for delivery in deliveries]


def test_every_change_sends_a_signed_event(sandbox, receiver):
    flow_id = sandbox.create(webhookUrl=receiver.url)["flowId"]
    sandbox.control(flow_id, "open")
    sandbox.control(flow_id, "accept")
    events = sorted(verified_events(receiver.wait_for(3)), key=lambda event: event["data"]["version"])
    assert [event["type"] for event in events] == ["flow.created", "flow.status_changed", "flow.status_changed"]
    assert [event["data"]["status"] for event in events] == ["Unopened", "Opened", "Accepted"]
    assert [event["data"]["previousStatus"] for event in events] == [None, "Unopened", "Opened"]
    assert all(event["data"]["flowId"] == flow_id for event in events)
    assert len({event["id"] for event in events}) == 3
    for delivery in receiver.deliveries:
        assert delivery["headers"]["Webhook-Id"] == json.loads(delivery["body"])["id"]
        assert delivery["headers"]["Content-Type"] == "application/json"


def test_a_configured_secret_signs(make_sandbox, receiver):
    secret = "whsec_" + "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0"
    sandbox = make_sandbox(SANDBOX_WEBHOOK_SECRET=secret)
    sandbox.create(webhookUrl=receiver.url)
    assert verified_events(receiver.wait_for(1), secret)[0]["type"] == "flow.created"


def test_the_api_does_not_wait_for_a_slow_receiver(sandbox, receiver):
    receiver.open.clear()  # the receiver holds every delivery until the create has been answered
    try:
        sandbox.create(webhookUrl=receiver.url)
        assert receiver.deliveries == []
    finally:
        receiver.open.set()
    assert receiver.wait_for(1)


def test_a_failing_receiver_gets_retries_then_the_flow_gets_an_incident(sandbox, receiver):
    receiver.status = 500
    flow_id = sandbox.create(webhookUrl=receiver.url)["flowId"]
    deliveries = receiver.wait_for(5)
    ids = {delivery["headers"]["Webhook-Id"] for delivery in deliveries[:5]}
    assert len(ids) == 1, "every retry carries the same webhook-id"
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        flow = sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]
        if flow["hasIncidents"]:
            break
        time.sleep(0.05)
    incidents = list(flow["incidents"].values())
    assert len(incidents) == 1
    assert incidents[0]["taskType"] == "send-initiate-webhook"
    assert incidents[0]["taskCategory"] == "incident"
    assert incidents[0]["id"] in flow["incidents"]
    assert flow["hasErrors"] is True
    attempts = [entry["attempt"] for entry in sandbox.deliveries() if entry["type"] == "flow.created"]
    assert attempts == [1, 2, 3, 4, 5]
    assert len(sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["incidents"]) == 1


def test_a_receiver_that_recovers_gets_the_event(sandbox, receiver):
    receiver.status = 503
    flow_id = sandbox.create(webhookUrl=receiver.url)["flowId"]
    receiver.wait_for(2)
    receiver.status = 200
    receiver.wait_for(3)
    wait_until(lambda: len(sandbox.deliveries()) >= 3, "the sandbox to record the third attempt")
    assert sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["hasIncidents"] is False
    assert [entry["status"] for entry in sandbox.deliveries()][:3] == [503, 503, 200]


def test_an_unreachable_receiver_leads_to_an_incident(sandbox):
    flow_id = sandbox.create(webhookUrl="http://127.0.0.1:9/unreachable")["flowId"]
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        if sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["hasIncidents"]:
            return
        time.sleep(0.05)
    raise AssertionError("no incident after the last failed attempt")
