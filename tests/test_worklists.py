"""Stuck flows and the incident queue, against sandbox flows put in those states and a real database.

Incidents come as the sandbox makes them (a webhook address that refuses every delivery), or from the
stand-in service where a test needs an incident to go away and come back. "Stuck" is judged at an
injected moment, never after a sleep.
"""

import importlib.util
import json
import re
from datetime import UTC, datetime, timedelta
from html import unescape
from pathlib import Path

import pytest
from altservice import PORTAL_SETTINGS as ALT_SETTINGS
from sqlalchemy import event, select, text, update
from support import add_user, deliver_signed, sign_in, wait_until

from portal.extensions import db
from portal.flowapi.records import FlowDetail
from portal.flowindex.feed import writer
from portal.flowindex.observations import DETAIL, LIST, WEBHOOK, Observation, from_detail
from portal.flowindex.store import apply_observations
from portal.models import FlowIncident, FlowRecord
from portal.worklists import (
    Cursor,
    count_stuck,
    find_stuck,
    flows_with_open_incidents,
    open_incident_groups,
    stuck_page,
)

KEY = b"test-index-key-0123456789"
NATIONAL_ID = "15108695088"
TASK = "send-initiate-webhook"


def client_for(app, role: str = "viewer"):
    client = app.test_client()
    assert sign_in(client, add_user(app, role=role)).status_code == 302
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
def alt_portal(make_app, database_url, alt):
    return make_app(
        database=database_url,
        sandbox_url=alt.url,
        **ALT_SETTINGS,
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


def test_stuck_page_with_paging_between_its_rows(portal, sandbox):
    created = [sandbox.create()["flowId"] for _ in range(3)]
    assert sandbox.control(created[1], "open").status_code == 200
    assert portal.test_cli_runner().invoke(args=["flows", "sync"]).exit_code == 0
    later = record_of(portal, created[-1]).created_at + timedelta(hours=49)
    with portal.app_context():
        first = stuck_page(later, timedelta(hours=48), limit=2)
        second = stuck_page(later, timedelta(hours=48), after=first.next_cursor, limit=2)
        counted = count_stuck(later, timedelta(hours=48)), count_stuck(later, timedelta(hours=48), cap=1)
    assert counted == (3, 2), "a capped count stops one past its cap"
    # The opened one last: its last change is its opening, which the sync found after all three were created.
    assert [flow.flow_id for flow in first.rows + second.rows] == [created[0], created[2], created[1]]
    assert first.next_cursor and second.next_cursor is None


# -- the pages ---------------------------------------------------------------------------------


def staff_at(app, moment: datetime, role: str = "viewer"):
    """A signed-in client of a portal whose clock says `moment` (signed in then, so the session is fresh)."""
    app.extensions["portal.clock"] = moment.timestamp
    return client_for(app, role)


def flashes(page) -> list[str]:
    return [unescape(text) for text in re.findall(r'class="alert alert-warning" role="alert">([^<]+)<', page.text)]


def test_the_stuck_page_lists_stuck_flows_with_their_age_and_a_link_to_act(portal, sandbox, refusing):
    quiet = sandbox.create(national_id="811218-9876")["flowId"]
    opened = sandbox.create()["flowId"]
    assert sandbox.control(opened, "open").status_code == 200
    done = sandbox.create()["flowId"]
    assert sandbox.control(done, "accept").status_code == 200
    troubled = troubled_flow(sandbox, refusing)
    assert portal.test_cli_runner().invoke(args=["flows", "sync"]).exit_code == 0
    staff = staff_at(portal, record_of(portal, done).created_at + timedelta(days=3, minutes=5))
    assert staff.get(f"/flows/{troubled}").status_code == 200  # its incident is read from its page
    flushed(portal)

    page = staff.get("/insights/stuck")
    assert page.status_code == 200
    rows = re.findall(r'data-testid="stuck-row" data-flow="([^"]+)"', page.text)
    assert set(rows) == {quiet, opened, troubled} and done not in page.text.split('data-testid="incident-flows"')[0]
    assert "3 flows without change for more than 48 hours" in page.text
    assert "3 days without change" in page.text
    assert "811218-••••" in page.text and "151086•••••" in page.text
    assert "811218-9876" not in page.text and NATIONAL_ID not in page.text
    assert f'href="/flows/{quiet}"' in page.text
    section = page.text.split('data-testid="incident-flows"')[1]
    assert re.findall(r'data-testid="incident-flow-row" data-flow="([^"]+)"', section) == [troubled]
    assert "1 flow with open incidents" in section
    assert 'aria-current="page" ' in page.text or 'aria-current="page">' in page.text

    quiet_hours = staff.get("/insights/stuck?hours=100")
    assert 'data-testid="empty-stuck"' in quiet_hours.text and "changed within the last 100 hours" in quiet_hours.text
    one_hour = staff.get("/insights/stuck?hours=1")  # each count with its own plural: "1 hour", not "1 hours"
    assert "3 flows without change for more than 1 hour</h2>" in one_hour.text
    in_norwegian = staff.get("/insights/stuck?hours=1", headers={"Accept-Language": "nb"})
    assert "3 flyter uten endring på mer enn 1 time</h2>" in in_norwegian.text


@pytest.mark.parametrize(
    ("query", "location", "message"),
    [
        ("hours=0", "/insights/stuck", "whole number from 1 to 8760"),
        ("hours=abc", "/insights/stuck", "whole number"),
        ("hours=1.5&after=1.2", "/insights/stuck?after=1.2", "whole number"),
        ("hours=99999", "/insights/stuck", "whole number"),
        ("hours=12&after=yesterday", "/insights/stuck?hours=12", "page position is not valid"),
        ("incidents_after=1.x", "/insights/stuck", "page position is not valid"),
    ],
)
def test_unusable_stuck_values_are_named_and_dropped(portal, query, location, message):
    staff = client_for(portal)
    answer = staff.get(f"/insights/stuck?{query}")
    assert answer.status_code == 302 and answer.headers["Location"] == location
    shown = staff.get(location)
    assert shown.status_code == 200 and any(message in text for text in flashes(shown)), flashes(shown)


def test_the_incident_queue_groups_open_incidents_with_message_flow_age_and_actions(portal, sandbox, refusing):
    troubled = [troubled_flow(sandbox, refusing) for _ in range(2)]
    other = sandbox.create()["flowId"]
    staff = staff_at(portal, datetime.now(UTC) + timedelta(hours=30))
    for flow_id in [*troubled, other]:
        assert staff.get(f"/flows/{flow_id}").status_code == 200
    event = {
        "id": "evt-scoring",
        "type": "flow.incident",
        "timestamp": _now(),
        "data": {"flowId": other, "incident": {"id": "score-1", "message": "Scoring failed for 811218-9876"}},
    }
    assert deliver_signed(portal, event).status_code in (200, 204)
    flushed(portal)

    page = staff.get("/insights/incidents")
    assert page.status_code == 200
    assert "3 open incidents" in page.text and "2 groups" in page.text
    groups = page.text.split('data-testid="incident-group"')[1:]
    assert TASK in groups[0] and "2 incidents" in groups[0] and "on 2 flows" in groups[0]
    # The list of groups says what its counts count, for a screen reader (an accessibility review: bare numbers)
    assert '<span class="visually-hidden">2 incidents</span>' in page.text.split('data-testid="incident-group"')[0]
    assert "—" in groups[1] and "1 incident" in groups[1] and "Scoring failed for 811218-••••" in groups[1]
    assert NATIONAL_ID not in page.text and "811218-9876" not in page.text
    assert "customer=151086•••••" in groups[0] and "1 day" in groups[0]
    assert '<th scope="col">Known for</th>' in page.text and "first seen " in groups[0], "how long the portal knew it"
    for flow_id in troubled:
        assert f'href="/flows/{flow_id}"' in groups[0]
    assert re.search(r'<span class="action-label" data-action="assign">Assign</span>', groups[0]), "named, not a button"
    with portal.app_context():
        first = flows_with_open_incidents(limit=2)
        second = flows_with_open_incidents(first.next_cursor, limit=2)
    assert [flow.flow_id for flow in first.rows + second.rows] == [*troubled, other] and second.next_cursor is None
    content = "".join(groups).split("</main>")[0]
    assert "<button" not in content and "<form" not in content, "actions are labels, not buttons"


def test_an_incident_group_pages_through_its_incidents(portal, sandbox):
    body = sandbox.api("GET", f"/api/applications/{sandbox.create()['flowId']}").json()
    many = {f"inc-{n:03d}": {"id": f"inc-{n:03d}", "message": f"failure {n}", "taskType": "score"} for n in range(60)}
    detail = FlowDetail.from_json({**body, "flow": body["flow"] | {"incidents": many, "hasIncidents": True}})
    with portal.app_context():
        apply_observations([from_detail(detail, datetime.now(UTC))], KEY)
    staff = client_for(portal)
    queue = staff.get("/insights/incidents")
    assert queue.text.count('data-testid="incident-row"') == 10
    whole = re.search(r'href="([^"]+)" data-testid="whole-group"', queue.text)
    assert whole and "Show all 60 incidents of this group" in queue.text
    first = staff.get(unescape(whole.group(1)))
    assert first.status_code == 200 and first.text.count('data-testid="incident-row"') == 50
    onward = re.search(r'rel="next" href="([^"]+)"', first.text)
    second = staff.get(unescape(onward.group(1)))
    seen = re.findall(r'data-incident="([^"]+)"', first.text) + re.findall(r'data-incident="([^"]+)"', second.text)
    assert sorted(seen) == sorted(many) and 'rel="next"' not in second.text
    assert "⇤ Oldest" in second.text

    missing = staff.get("/insights/incidents?type=nothing&category=(none)")
    assert missing.status_code == 200 and "No open incidents in this group." in missing.text
    bad = staff.get("/insights/incidents?type=score&category=%00")
    assert bad.status_code == 302 and bad.headers["Location"] == "/insights/incidents"


def test_empty_work_lists_say_so(portal):
    staff = client_for(portal)
    assert "No stuck flows." in staff.get("/insights/stuck").text
    assert "No flow has an open incident." in staff.get("/insights/stuck").text
    queue = staff.get("/insights/incidents")
    assert "No open incidents." in queue.text and "0 open incidents" in queue.text


def test_the_work_lists_need_sign_in(portal):
    anonymous = portal.test_client()
    for path in ("/insights/stuck", "/insights/stuck?hours=2", "/insights/incidents"):
        answer = anonymous.get(path)
        assert answer.status_code == 302 and "/login" in answer.headers["Location"]


def test_an_incident_with_lone_surrogates_is_stored_cleaned_and_spoils_no_batch(portal, sandbox):
    flow_id, other = sandbox.create()["flowId"], sandbox.create()["flowId"]
    incident = {"id": "inc-\ud800", "taskType": "t\udfff", "message": "m\ud800 \x00"}
    body = {"id": "evt-surrogates", "type": "flow.incident", "timestamp": _now(), "data": {"flowId": flow_id}}
    assert deliver_signed(portal, body | {"data": {"flowId": flow_id, "incident": incident}}).status_code == 200
    fine = body | {"id": "evt-fine", "data": {"flowId": other, "incident": {"id": "inc-ok", "message": "ok"}}}
    assert deliver_signed(portal, fine).status_code == 200
    [row] = incidents_of(portal, flow_id)
    assert (row.incident_id, row.task_type, row.message) == ("inc-\ufffd", "t\ufffd", "m\ufffd")
    assert [row.incident_id for row in incidents_of(portal, other)] == ["inc-ok"]


# -- the stored last change --------------------------------------------------------------------

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
MIGRATION = Path(__file__).resolve().parents[1] / "portal" / "migrations" / "versions" / "0010_last_change.py"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def last_change_of(app, flow_id: str) -> datetime | None:
    with app.app_context():
        return db.session.scalar(select(FlowRecord.last_change_at).where(FlowRecord.flow_id == flow_id))


def migration_0010():
    spec = importlib.util.spec_from_file_location("migration_0010", MIGRATION)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Each step of one flow and the last change it leaves: first sight, creation, opening, then updatedAt.
STEPS = (
    (Observation("f-lc", WEBHOOK, at(1), at(1), version=1), at(1), "an event alone: when the portal first saw it"),
    (
        Observation("f-lc", LIST, at(2), at(2), consent_status="Unopened", created_at=at(0)),
        at(0),
        "a list gives the creation",
    ),
    (Observation("f-lc", WEBHOOK, at(4), at(3), version=2, consent_status="Opened"), at(3), "an event opens it"),
    (
        Observation("f-lc", DETAIL, at(6), at(6), version=2, updated_at=at(2)),
        at(3),
        "an updatedAt older than the opening is not taken",
    ),
    (Observation("f-lc", DETAIL, at(8), at(8), version=3, updated_at=at(7)), at(7), "a newer updatedAt is"),
    (
        Observation("f-lc", LIST, at(9), at(9), consent_status="Opened", updated_at=at(7)),
        at(7),
        "a list seeing it again changes nothing",
    ),
)


def test_the_index_keeps_each_flows_last_change_from_every_source(portal):
    for observation, expected, why in STEPS:
        with portal.app_context():
            apply_observations([observation], KEY)
        assert last_change_of(portal, "f-lc") == expected, why


def test_the_migrations_backfill_gives_what_the_writer_keeps(portal):
    flows = [
        Observation("b-stub", WEBHOOK, at(1), at(1), version=1),
        Observation("b-created", LIST, at(2), at(2), consent_status="Unopened", created_at=at(0)),
        Observation("b-opened", WEBHOOK, at(3), at(2), consent_status="Opened"),
        Observation("b-updated", DETAIL, at(4), at(4), created_at=at(0), updated_at=at(3)),
        Observation("b-same", LIST, at(5), at(5), consent_status="Opened", updated_at=at(4)),  # opened == updated
    ]
    with portal.app_context():
        apply_observations(flows + list(observation for observation, _, _ in STEPS), KEY)
        kept = dict(db.session.execute(select(FlowRecord.flow_id, FlowRecord.last_change_at)).all())
        db.session.execute(update(FlowRecord).values(last_change_at=None))
        db.session.execute(text(migration_0010().BACKFILL))
        db.session.commit()
        backfilled = dict(db.session.execute(select(FlowRecord.flow_id, FlowRecord.last_change_at)).all())
    assert None not in kept.values() and backfilled == kept
    assert kept["b-same"] == at(4) and kept["b-opened"] == at(2) and kept["b-stub"] == at(1)


def executed(app, run) -> list[tuple[str, object]]:
    """The statements (with their parameters) that `run()` sends to the database."""
    statements = []

    def keep(connection, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))

    with app.app_context():
        event.listen(db.engine, "before_cursor_execute", keep)
        try:
            run()
        finally:
            event.remove(db.engine, "before_cursor_execute", keep)
    return statements


def query_plan(app, statement: str, parameters) -> str:
    with app.app_context(), db.engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            rows = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters).all()
            return "\n".join(str(row[-1]) for row in rows)
        # A few rows make any plan cheap: rule out the others, so only the partial index can answer in order.
        for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            connection.exec_driver_sql(f"SET {setting} = off")
        return "\n".join(row[0] for row in connection.exec_driver_sql(f"EXPLAIN {statement}", parameters))


def test_the_stuck_list_and_its_count_are_read_from_the_partial_index(portal):
    with portal.app_context():
        apply_observations([observation for observation, _, _ in STEPS], KEY)
    later = at(60 * 24 * 3)
    statements = executed(
        portal,
        lambda: (
            stuck_page(later, timedelta(hours=48)),
            stuck_page(later, timedelta(hours=48), after=Cursor(at(1), 1)),
            count_stuck(later, timedelta(hours=48)),
        ),
    )
    stuck_queries = [(sql, parameters) for sql, parameters in statements if "last_change_at <" in sql]
    assert len(stuck_queries) == 3
    for sql, parameters in stuck_queries:
        assert "ix_flow_index_not_done_change" in query_plan(portal, sql, parameters), sql
    later_page = query_plan(portal, *stuck_queries[1])
    assert "last_change_at>?" in later_page or "ROW(" in later_page, "a later page seeks to its cursor"


def test_a_flood_of_task_types_keeps_the_queue_one_page_of_previews_and_names(portal, sandbox):
    from portal.views.worklists import LISTED_GROUPS, PREVIEWED_GROUPS

    flow_id = sandbox.create()["flowId"]
    odd = [{"id": f"inc-{n}", "taskType": f"type-{n:03d}", "message": "m"} for n in range(LISTED_GROUPS + 5)]
    body = {
        "id": "evt-flood",
        "type": "flow.incident",
        "timestamp": _now(),
        "data": {"flowId": flow_id, "incident": odd},
    }
    assert deliver_signed(portal, body).status_code == 200
    flushed(portal)
    page = client_for(portal).get("/insights/incidents").text
    assert page.count('data-testid="incident-group"') == PREVIEWED_GROUPS
    other = page.split('data-testid="other-groups"')[1]
    assert other.count("<li>") == LISTED_GROUPS - PREVIEWED_GROUPS and "type=type-020" in other
    assert "5 smaller groups are not listed here" in page
    assert f"{LISTED_GROUPS + 5} open incidents" in page


def test_counts_in_sentences_are_grouped_as_the_language_groups_numbers(portal):
    staff = staff_at(portal, datetime.now(UTC))
    english = staff.get("/insights/stuck?hours=8760").text
    assert "without change for more than 8,760 hours" in english
    assert staff.post("/language", data={"language": "nb", "next": "/flows"}).status_code == 302
    norwegian = unescape(staff.get("/insights/stuck?hours=8760").text)
    assert "8\u00a0760 timer" in norwegian


def test_the_work_lists_show_a_cancelled_or_archived_flow_as_such_beside_its_consent(portal, sandbox):
    """An archived, cancelled flow whose consent stopped at Unopened read as one still waiting for the person."""
    flows = {}
    for name in ("live", "ended", "archived"):
        body = sandbox.api("GET", f"/api/applications/{sandbox.create()['flowId']}").json()
        incident = {f"inc-{name}": {"id": f"inc-{name}", "message": f"failure of {name}", "taskType": "score"}}
        detail = FlowDetail.from_json({**body, "flow": body["flow"] | {"incidents": incident, "hasIncidents": True}})
        with portal.app_context():
            apply_observations([from_detail(detail, datetime.now(UTC))], KEY)
        flows[name] = detail.flow_id
    with portal.app_context():
        db.session.execute(update(FlowRecord).values(consent_status="Unopened"))  # as the service's list says
        ended = FlowRecord.flow_id == flows["ended"]
        db.session.execute(update(FlowRecord).where(ended).values(lifecycle="cancelled", archived=True))
        db.session.execute(update(FlowRecord).where(FlowRecord.flow_id == flows["archived"]).values(archived=True))
        db.session.commit()
    staff = client_for(portal)

    def states(page: str, row: str) -> dict[str, list[str]]:
        found = {}
        for part in page.split(f'data-testid="{row}"')[1:]:
            flow_id = next(flow_id for name, flow_id in flows.items() if f"/flows/{flow_id}" in part)
            cell = part.split('data-testid="flow-state"')[1].split("</td>")[0]
            found[flow_id] = re.findall(r'data-status-code="([^"]+)"', cell)
        return found

    expected = {flows["live"]: ["Unopened"], flows["ended"]: ["Unopened", "cancelled", "archived"]}
    expected[flows["archived"]] = ["Unopened", "archived"]
    queue = staff.get("/insights/incidents").text
    assert states(queue, "incident-row") == expected
    assert states(staff.get("/insights/stuck").text, "incident-flow-row") == expected
    assert ">cancelled</span>" in queue and ">archived</span>" in queue


def test_actions_read_while_a_flow_ran_are_not_shown_once_it_has_ended(portal, sandbox):
    """Found by a helper: a flow cancelled after its page was read still offered Assign and Cancel in the queue."""
    body = sandbox.api("GET", f"/api/applications/{sandbox.create()['flowId']}").json()
    incident = {"inc-1": {"id": "inc-1", "message": "failure", "taskType": "score"}}
    detail = FlowDetail.from_json({**body, "flow": body["flow"] | {"incidents": incident, "hasIncidents": True}})
    read_at = datetime.now(UTC)
    later = read_at + timedelta(minutes=1)
    same_lifecycle = Observation(detail.flow_id, LIST, later, later, lifecycle="active", archived=False)
    cancelled = Observation(detail.flow_id, WEBHOOK, later, later + timedelta(minutes=1), lifecycle="cancelled")
    with portal.app_context():
        apply_observations([from_detail(detail, read_at), same_lifecycle], KEY)
    assert record_of(portal, detail.flow_id).actions == "read,assign,cancel", "a list that says the same keeps them"
    staff = client_for(portal)
    assert 'data-action="cancel"' in staff.get("/insights/incidents").text
    with portal.app_context():
        apply_observations([cancelled], KEY)
    assert record_of(portal, detail.flow_id).actions is None
    queue = staff.get("/insights/incidents").text
    assert detail.flow_id in queue and 'data-action="cancel"' not in queue and 'data-action="assign"' not in queue
