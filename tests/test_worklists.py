"""Stuck flows and the incident queue, against sandbox flows put in those states and a real database.

Incidents come as the sandbox makes them (a webhook address that refuses every delivery), or from the
stand-in service where a test needs an incident to go away and come back. "Stuck" is judged at an
injected moment, never after a sleep.
"""

import json
import time
from datetime import UTC, datetime, timedelta

import pytest
from altservice import AltOptions, create_alt_service
from sqlalchemy import select
from support import deliver_signed, sign_in
from test_views import make_user_for

from portal.extensions import db
from portal.flowapi.models import FlowDetail
from portal.flowindex.feed import writer
from portal.flowindex.observations import from_detail
from portal.flowindex.store import apply_observations
from portal.models import FlowIncident, FlowRecord
from portal.worklists import find_stuck, open_incident_groups

KEY = b"test-index-key-0123456789"
NATIONAL_ID = "15108695088"
TASK = "send-initiate-webhook"


def wait_until(condition, what: str, seconds: float = 15):
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, what
        time.sleep(0.02)
    return found


def client_for(app, role: str = "viewer"):
    client = app.test_client()
    assert sign_in(client, make_user_for(app, role)).status_code == 302
    return client


def flushed(app) -> None:
    with app.app_context():
        assert writer().flush()


def incidents_of(app, flow_id: str) -> list[FlowIncident]:
    flushed(app)
    with app.app_context():
        rows = list(db.session.scalars(select(FlowIncident).where(FlowIncident.flow_id == flow_id)))
        db.session.expunge_all()
    return rows


def record_of(app, flow_id: str) -> FlowRecord:
    flushed(app)
    with app.app_context():
        record = db.session.scalar(select(FlowRecord).where(FlowRecord.flow_id == flow_id))
        db.session.expunge_all()
    return record


def has_incident(sandbox, flow_id: str) -> bool:
    return sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["hasIncidents"]


@pytest.fixture
def refusing(receiver):
    """A webhook address that refuses every delivery: the sandbox gives up and records an incident."""
    receiver.status = 503
    return receiver


@pytest.fixture
def portal(make_app, database_url, sandbox):
    return make_app(database=database_url, WTF_CSRF_ENABLED=False)


def troubled_flow(sandbox, refusing, national_id: str = NATIONAL_ID) -> str:
    """A flow whose webhook deliveries all failed; the address names the person, so the message does too."""
    flow_id = sandbox.create(national_id=national_id, webhookUrl=f"{refusing.url}?customer={national_id}")["flowId"]
    wait_until(lambda: has_incident(sandbox, flow_id), "the sandbox never recorded the failed webhook")
    return flow_id


# -- recording incidents -----------------------------------------------------------------------


def test_the_flow_page_records_its_incidents_masked_and_its_actions(portal, sandbox, refusing):
    flow_id = troubled_flow(sandbox, refusing)
    page = client_for(portal).get(f"/flows/{flow_id}")
    assert page.status_code == 200
    [incident] = incidents_of(portal, flow_id)
    upstream = sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["incidents"]
    assert incident.incident_id in upstream and NATIONAL_ID in upstream[incident.incident_id]["message"]
    assert (incident.task_type, incident.task_category, incident.source) == (TASK, "incident", "detail")
    assert NATIONAL_ID not in incident.message and "customer=151086•••••" in incident.message
    assert "failed after 5 attempts" in incident.message and incident.resolved_at is None
    assert record_of(portal, flow_id).actions == "read,assign,cancel"


def test_a_flow_incident_event_is_recorded_from_any_shape(portal, sandbox, refusing):
    flow_id = troubled_flow(sandbox, refusing)
    event = json.loads(wait_until(lambda: _incident_event(refusing), "no flow.incident event was sent"))
    assert deliver_signed(portal, event).status_code in (200, 204)
    [incident] = incidents_of(portal, flow_id)
    assert incident.incident_id == event["data"]["incident"]["id"] and incident.source == "webhook"
    assert NATIONAL_ID not in incident.message and incident.task_type == TASK

    odd = [
        {"id": "as-a-list", "message": f"person {NATIONAL_ID} unreachable"},
        {"message": "no id, no task"},
        "just words",
        17,
    ]
    other = sandbox.create()["flowId"]
    for data in ({"incident": odd}, {"incident": {"keyed-1": {"taskType": "score", "message": 5}}}):
        body = {
            "id": f"evt-{len(str(data))}",
            "type": "flow.incident",
            "timestamp": _now(),
            "data": {"flowId": other, **data},
        }
        assert deliver_signed(portal, body).status_code in (200, 204)
    rows = {row.incident_id: row for row in incidents_of(portal, other)}
    assert rows["as-a-list"].message == "person 151086••••• unreachable"
    assert rows["keyed-1"].task_type == "score" and rows["keyed-1"].message is None
    assert {row.message for row in rows.values()} >= {"no id, no task", "just words"}
    assert len(rows) == 4, "a number is no incident"


def _incident_event(receiver) -> str | None:
    for delivery in receiver.deliveries:
        if b'"flow.incident"' in delivery["body"]:
            return delivery["body"].decode()
    return None


def _now() -> str:
    return datetime.now(UTC).isoformat()


@pytest.fixture
def alt(serve):
    app = create_alt_service(AltOptions())
    service = app.extensions["alt"]
    service.url = serve(app)
    return service


@pytest.fixture
def alt_portal(make_app, database_url, alt):
    return make_app(
        database=database_url,
        sandbox_url=alt.url,
        FLOW_REALM="alt",
        FLOW_CLIENT_ID="alt-client",
        FLOW_CLIENT_SECRET="alt-secret",
        WTF_CSRF_ENABLED=False,
    )


def test_an_incident_the_service_no_longer_lists_is_resolved_and_reopened_when_it_returns(alt_portal, alt):
    flow = next(flow for flow in alt.flows if flow.incidents and not flow.archived)
    staff = client_for(alt_portal)
    listed = list(flow.incidents)
    assert staff.get(f"/flows/{flow.id}").status_code == 200
    [first] = incidents_of(alt_portal, flow.id)
    assert first.resolved_at is None and first.incident_id == listed[0]["id"]

    flow.incidents = []
    assert staff.get(f"/flows/{flow.id}").status_code == 200
    [resolved] = incidents_of(alt_portal, flow.id)
    assert resolved.resolved_at is not None and resolved.first_seen_at == first.first_seen_at

    flow.incidents = listed
    alt.set(detail="quirky")  # now a list: the ids inside the records still name them
    assert staff.get(f"/flows/{flow.id}").status_code == 200
    [reopened] = incidents_of(alt_portal, flow.id)
    assert reopened.resolved_at is None and reopened.last_seen_at > resolved.last_seen_at
    assert reopened.first_seen_at == first.first_seen_at


def test_an_older_report_neither_resolves_nor_reopens(portal, sandbox, refusing):
    flow_id = troubled_flow(sandbox, refusing)
    body = sandbox.api("GET", f"/api/applications/{flow_id}").json()
    with_incident = FlowDetail.from_json(body)
    without = FlowDetail.from_json({**body, "flow": body["flow"] | {"incidents": {}, "hasIncidents": False}})
    t0 = datetime(2026, 11, 1, 12, tzinfo=UTC)
    with portal.app_context():
        apply_observations([from_detail(with_incident, t0)], KEY)
        apply_observations([from_detail(without, t0 - timedelta(minutes=1))], KEY)  # fetched before: late
        assert db.session.scalar(select(FlowIncident.resolved_at)) is None
        apply_observations([from_detail(without, t0 + timedelta(minutes=2))], KEY)
        assert db.session.scalar(select(FlowIncident.resolved_at)) == t0 + timedelta(minutes=2)
        apply_observations([from_detail(with_incident, t0 + timedelta(minutes=1))], KEY)  # older than resolution
        assert db.session.scalar(select(FlowIncident.resolved_at)) == t0 + timedelta(minutes=2)
        assert [group.incidents for group in open_incident_groups()] == []


# -- stuck flows -------------------------------------------------------------------------------


def test_stuck_flows_are_the_unfinished_ones_without_change_for_longer_than_the_limit(portal, sandbox):
    flows = {}
    for name, actions in (
        ("unopened", ()),
        ("opened", ("open",)),
        ("accepted", ("accept",)),
        ("rejected", ("reject",)),
        ("cancelled", ("cancel",)),
        ("archived", ("archive",)),
    ):
        flows[name] = sandbox.create()["flowId"]
        for action in actions:
            assert sandbox.control(flows[name], action).status_code == 200
    result = portal.test_cli_runner().invoke(args=["flows", "sync", "--all"])
    assert result.exit_code == 0, result.output
    with portal.app_context():
        newest = max(record_of(portal, flow_id).created_at for flow_id in flows.values())
        assert find_stuck(newest + timedelta(hours=47), timedelta(hours=48)) == []
        stuck = find_stuck(newest + timedelta(hours=49), timedelta(hours=48))
    assert [flow.flow_id for flow in stuck] == [flows["unopened"], flows["opened"]], "oldest change first"
    assert [flow.consent_status for flow in stuck] == ["Unopened", "Opened"]
    assert all(flow.open_incidents == 0 and flow.last_change_at is not None for flow in stuck)
