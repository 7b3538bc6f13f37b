"""Gap detection: a change to a flow the portal never heard about, and events for flows the service does not know.

The rule is tested as a table; then end to end: a real sandbox over HTTP sends its webhooks to a served
portal, a `drop_webhooks` fault blocks one, and the flow page, `flows sync`, /admin/gaps and a refresh
see it; the store is SQLite and PostgreSQL. Time for the grace comes from the portal's injected clock.
"""

import re
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import select
from support import PASSWORD, add_user, deliver_signed, sign_in, wait_until

from portal.extensions import db
from portal.flowindex.gaps import (
    LIFECYCLE,
    SILENT,
    STATUS,
    TIME,
    VERSION,
    EventHeard,
    Gap,
    Heard,
    ServiceSays,
    describe_gap,
    find_gap,
    heard_from,
    read_stored,
)
from portal.models import FlowRecord, WebhookEvent

T0 = datetime(2026, 11, 24, 13, 40, tzinfo=timezone.utc)
PORTAL_HOOK = "https://portal.example/webhooks/flow"
GRACE = 300


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def says(**fields) -> ServiceSays:
    return ServiceSays(**({"webhook_url": PORTAL_HOOK} | fields))


def heard(**fields) -> Heard:
    return Heard(**({"received": True} | fields))


# (what the service says, what the portal heard, minutes after T0 it is now) -> the gap's kind, or None
RULES = {
    "a version the events never reached": (says(version=5, updated_at=at(22)), heard(version=3, at=at(0)), 30, VERSION),
    "the version heard is the service's": (says(version=3, updated_at=at(22)), heard(version=3, at=at(0)), 30, None),
    "the version decides whatever the clocks say": (
        says(version=3, updated_at=at(22), consent_status="Accepted"),
        heard(version=3, at=at(0), status="Opened"),
        30,
        None,
    ),
    "a change younger than the grace may still be on its way": (
        says(version=5, updated_at=at(28)),
        heard(version=3, at=at(0)),
        30,
        None,
    ),
    "just past the grace": (says(version=5, updated_at=at(25)), heard(version=3, at=at(0)), 30, VERSION),
    "no version in events: a later change": (says(version=5, updated_at=at(22)), heard(at=at(0)), 30, TIME),
    "no version anywhere: a later change": (says(updated_at=at(22)), heard(at=at(0)), 30, TIME),
    "no version: the event is of the same change": (
        says(version=2, updated_at=at(0) + timedelta(seconds=1)),
        heard(at=at(0)),
        30,
        None,
    ),
    "no version, no time: a status no event said": (
        says(consent_status="Accepted", status_at=at(20)),
        heard(at=at(0), status="Opened"),
        30,
        STATUS,
    ),
    "no version, no time: a status and no event said any": (
        says(consent_status="Rejected"),
        heard(at=at(0)),
        30,
        STATUS,
    ),
    "a first status needs no event": (says(consent_status="Unopened"), heard(at=at(0)), 30, None),
    "the list's status is older than the last event": (
        says(consent_status="Opened", status_at=at(-5)),
        heard(at=at(0), status="Accepted"),
        30,
        None,
    ),
    "a lifecycle no event said": (says(lifecycle="cancelled"), heard(at=at(0), lifecycle="active"), 30, LIFECYCLE),
    "a lifecycle events never tell": (says(lifecycle="cancelled"), heard(at=at(0)), 30, None),
    "no webhook address: never a gap": (
        says(version=5, updated_at=at(0), webhook_url=None),
        heard(version=1, at=at(0)),
        30,
        None,
    ),
    "webhooks to another receiver, none here": (
        says(version=5, updated_at=at(0), webhook_url="https://other.example/hooks"),
        Heard(),
        30,
        None,
    ),
    "webhooks to another address, yet events arrive here": (
        says(version=5, updated_at=at(0), webhook_url="https://proxy.example/hooks"),
        heard(version=1, at=at(-1)),
        30,
        VERSION,
    ),
    "webhooks to this portal and not one event": (
        says(version=1, updated_at=at(0), webhook_url="HTTPS://Portal.example:443/webhooks/flow/"),
        Heard(),
        30,
        SILENT,
    ),
    "webhooks to this portal, the first event still on its way": (
        says(version=1, updated_at=at(28)),
        Heard(),
        30,
        None,
    ),
}


@pytest.mark.parametrize("name", RULES)
def test_the_rule(name):
    service, portal_heard, minutes, kind = RULES[name]
    gap = find_gap(service, portal_heard, portal_webhook_url=PORTAL_HOOK, now=at(minutes), grace=GRACE)
    assert (gap.kind if gap else None) == kind, name


def test_what_events_told_and_a_refresh_kept_are_read_together():
    kept = Heard(True, 4, at(10), "Opened")  # a refresh moved heard_* on to version 4
    events = [EventHeard(at(0), 1, "Unopened", "active"), EventHeard(at(5), None, "Opened", None)]
    assert heard_from(events, kept) == Heard(True, 4, at(10), "Opened", None)
    later = [EventHeard(at(12), 5, "Accepted", "completed")]
    assert heard_from(later, kept) == Heard(True, 5, at(12), "Accepted", "completed")
    assert heard_from([], Heard()) == Heard()


@pytest.mark.parametrize(
    ("gap", "said"),
    [
        (Gap(VERSION, 5, 3), "The service is at version 5; the portal last heard of version 3."),
        (
            Gap(TIME, heard=at(0).isoformat(), changed_at=at(22)),
            "The service changed the flow at 24 Nov 2026, 15:02:00 CET; "
            "the last event received is from 24 Nov 2026, 14:40:00 CET.",
        ),
        (Gap(STATUS, "Accepted"), "The service says Accepted; no event said so."),
        (Gap(STATUS, "Accepted", "Opened"), "The service says Accepted; the portal last heard Opened."),
        (Gap(LIFECYCLE, "cancelled", "active"), "The service says cancelled; the portal last heard active."),
        (Gap(SILENT, changed_at=at(0)), "No event was received for this flow, which the service last changed at"),
    ],
)
def test_a_reason_reads_as_words_in_the_portals_time_zone(app, gap, said):
    with app.test_request_context():
        assert read_stored(gap.stored) == gap
        assert describe_gap(gap.stored).startswith(said)
    assert read_stored("not json") is None and read_stored('{"kind": 1}') is None


# -- end to end --------------------------------------------------------------------------------


class MovableClock:
    """The portal's clock (`portal.clock`): real time plus an offset a test moves on, never a sleep."""

    def __init__(self):
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset

    def past_the_grace(self) -> None:
        self.offset = GRACE + 60


@pytest.fixture
def gap_app(make_app, database_url):
    app = make_app(database=database_url, WTF_CSRF_ENABLED=False, PORTAL_GAP_GRACE_SECONDS=str(GRACE))
    app.extensions["portal.clock"] = MovableClock()
    return app


@pytest.fixture
def admin(gap_app):
    add_user(gap_app, "ada", "admin")
    client = gap_app.test_client()
    assert sign_in(client, "ada").status_code == 302
    return client


def written(app) -> None:
    assert app.extensions["flow_index"].flush(10), "the index writer did not finish"


def heard_version(app, flow_id: str) -> int | None:
    """The version of the last event the index has taken in for the flow (after what was handed to it is written).

    An event is stored before it is handed to the index writer: a flush right after the store can come too early.
    """
    written(app)
    with app.app_context():
        return db.session.scalar(select(FlowRecord.heard_version).where(FlowRecord.flow_id == flow_id))


def events_of(app, flow_id: str) -> int:
    with app.app_context():
        return db.session.query(WebhookEvent).filter_by(flow_id=flow_id).count()


def row(app, flow_id: str) -> FlowRecord:
    with app.app_context():
        record = db.session.query(FlowRecord).filter_by(flow_id=flow_id).one()
        db.session.expunge(record)
        return record


def created_and_heard(sandbox, app, hook: str) -> str:
    """A flow whose webhooks come to the served portal, its flow.created stored and indexed."""
    flow_id = sandbox.create(webhookUrl=hook)["flowId"]
    wait_until(lambda: heard_version(app, flow_id) is not None, "the event to be stored and indexed")
    return flow_id


def accepted_unheard(sandbox, flow_id: str) -> None:
    """Accept the flow in the sandbox while its webhook is blocked: the portal never hears of it."""
    before = len([entry for entry in sandbox.deliveries() if entry.get("dropped")])
    sandbox.fault(mode="drop_webhooks", count=1)
    assert sandbox.control(flow_id, "accept").status_code == 200
    assert len([entry for entry in sandbox.deliveries() if entry.get("dropped")]) == before + 1


def gap_warning(page: str) -> str | None:
    found = re.search(r'data-testid="gap-reason">([^<]*)<', page)
    return found[1].strip() if found else None


def sync(app, *args):
    result = app.test_cli_runner().invoke(args=["flows", "sync", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_blocked_webhook_is_dropped_once_without_retry_or_incident(sandbox, receiver):
    flow_id = sandbox.create(webhookUrl=receiver.url)["flowId"]
    receiver.wait_for(1)
    sandbox.fault(mode="drop_webhooks", count=1)
    assert sandbox.api("GET", "/sandbox/faults", token=False).json()["faults"][0]["mode"] == "drop_webhooks"
    sandbox.control(flow_id, "open")
    sandbox.control(flow_id, "accept")  # the fault is used up: this one is sent
    receiver.wait_for(2)
    # the sandbox logs a delivery once its answer is back, which can be after the receiver has counted it
    log = wait_until(lambda: len(found := sandbox.deliveries()) >= 3 and found, "the sandbox to log the third delivery")
    assert [(entry["type"], entry.get("dropped", False)) for entry in log] == [
        ("flow.created", False),
        ("flow.status_changed", True),
        ("flow.status_changed", False),
    ]
    assert len(receiver.deliveries) == 2 and sandbox.stats()["webhooks_pending"] == 0
    assert sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["incidents"] == {}


def test_a_missed_change_is_flagged_on_the_page_listed_by_sync_and_cleared_by_a_refresh(gap_app, admin, sandbox, serve):
    hook = serve(gap_app) + "/webhooks/flow"
    seen, synced = created_and_heard(sandbox, gap_app, hook), created_and_heard(sandbox, gap_app, hook)
    accepted_unheard(sandbox, seen)
    accepted_unheard(sandbox, synced)

    assert gap_warning(admin.get(f"/flows/{seen}").text) is None, "within the grace the event may still come"
    gap_app.extensions["portal.clock"].past_the_grace()
    page = admin.get(f"/flows/{seen}").text
    assert gap_warning(page) == (
        "The service is at version 2; the portal last heard of version 1. "
        "A webhook event may have been lost or refused."
    )
    assert "Refresh from the service" in page and 'data-testid="heard-compared"' in page
    assert row(gap_app, seen).gap_at is not None

    output = sync(gap_app)
    assert "gaps: 2 (checked 2, found 1, cleared 0)" in output, output
    listed = admin.get("/admin/gaps")
    assert listed.status_code == 200
    for flow_id in (seen, synced):
        assert f'<tr data-flow-id="{flow_id}">' in listed.text
    assert listed.text.count("The service is at version 2; the portal last heard of version 1.") == 2

    refreshed = admin.post(f"/flows/{seen}/refresh")
    assert refreshed.status_code == 302 and refreshed.headers["Location"] == f"/flows/{seen}"
    after = admin.get(f"/flows/{seen}").text
    assert "refreshed from the Flow Service" in after and gap_warning(after) is None
    compared = re.search(r'data-testid="heard-compared">(.*?)</p>', after, re.S)[1]
    assert "The last event received said version 1 (" in compared, "the events' own word, not the refresh's"
    assert "A refresh from the service took version 2 as known: no event told of it." in compared
    record = row(gap_app, seen)
    assert (record.heard_version, record.gap_at, record.gap_reason) == (2, None, None)

    sandbox.fault(mode="drop_webhooks", count=1)  # a later change without an event: flagged again
    assert sandbox.control(seen, "archive").status_code == 200
    assert "version 3; the portal last heard of version 2." in gap_warning(admin.get(f"/flows/{seen}").text)
    assert "gaps: 2 (checked 2, found 0, cleared 0)" in sync(gap_app)

    from_the_list = admin.post(f"/flows/{synced}/refresh", data={"next": "/admin/gaps?before=x"})
    assert from_the_list.headers["Location"] == "/admin/gaps?before=x", "the gaps list's button goes back to it"
    off_site = admin.post(f"/flows/{synced}/refresh", data={"next": "https://evil.example/"})
    assert off_site.headers["Location"] == "/flows"


def test_a_refresh_takes_the_consent_status_that_only_the_list_says(gap_app, admin, sandbox, serve):
    """The retrieve response has no consent status: a refresh reads the flow's own list item beside a neighbour,
    for the oldest, a middle and the newest flow of the list alike; the page of a completed flow whose answer the
    portal has not seen does the same itself."""
    hook = serve(gap_app) + "/webhooks/flow"
    oldest, middle, newest = (created_and_heard(sandbox, gap_app, hook) for _ in range(3))
    for flow_id in (middle, oldest, newest):
        accepted_unheard(sandbox, flow_id)
        before = re.search(r'data-testid="detail-status">(.*?)</div>', admin.get(f"/flows/{flow_id}").text, re.S)[1]
        assert "Accepted" in before and "(the flow list" in before, "completed: the page asked the list itself"
        assert admin.post(f"/flows/{flow_id}/refresh").status_code == 302
        page = admin.get(f"/flows/{flow_id}").text
        status = re.search(r'data-testid="detail-status">(.*?)</div>', page, re.S)[1]
        assert "Accepted" in status and "did not show this flow" not in page, flow_id
        assert row(gap_app, flow_id).consent_status == "Accepted"


def test_sync_clears_a_flag_once_the_event_arrived_after_all(gap_app, admin, sandbox, serve):
    hook = serve(gap_app) + "/webhooks/flow"
    flow_id = created_and_heard(sandbox, gap_app, hook)
    accepted_unheard(sandbox, flow_id)
    early = sync(gap_app)
    assert "gaps: 0 (checked 1, found 0, cleared 0); 1 changed within PORTAL_GAP_GRACE_SECONDS" in early, early
    gap_app.extensions["portal.clock"].past_the_grace()
    assert "gaps: 0 (checked 0, found 0, cleared 0)" in sync(gap_app, "--gap-checks", "0"), "the check is bounded"
    assert "gaps: 1 (checked 1, found 1, cleared 0)" in sync(gap_app)
    assert sandbox.control(flow_id, "archive").status_code == 200  # this event arrives, with version 3
    wait_until(lambda: events_of(gap_app, flow_id) == 2, "both events to be stored")
    wait_until(lambda: heard_version(gap_app, flow_id) == 3, "the index to take in the archive event")
    assert "gaps: 0 (checked 1, found 0, cleared 1)" in sync(gap_app)
    assert 'data-testid="gap-flows"' not in admin.get("/admin/gaps").text


def test_events_without_versions_are_compared_by_time(gap_app, admin, sandbox):
    """A real service may send no version in its events: the times tell instead."""
    with gap_app.app_context():
        ours = gap_app.extensions["portal.settings"].webhook_url  # the address the portal's create form fills in
    sandbox.fault(mode="drop_webhooks", count=2)  # the sandbox's own events never arrive
    flow = sandbox.create(webhookUrl=ours)
    long_ago = datetime.now(timezone.utc) - timedelta(minutes=1)
    created = {"flowId": flow["flowId"], "referenceId": flow["referenceId"], "status": "Unopened"}
    payload = {"id": str(uuid.uuid4()), "type": "flow.created", "timestamp": long_ago.isoformat(), "data": created}
    assert deliver_signed(gap_app, payload).status_code == 200
    written(gap_app)
    assert sandbox.control(flow["flowId"], "accept").status_code == 200
    gap_app.extensions["portal.clock"].past_the_grace()
    page = admin.get(f"/flows/{flow['flowId']}").text
    warning = gap_warning(page)
    assert warning.startswith("The service changed the flow at ") and "the last event received is from" in warning
    compared = re.search(r'data-testid="heard-compared">(.*?)</p>', page, re.S)[1]
    assert "The events received carry no version; the last is from" in compared and "said version" not in compared


def test_a_flow_without_a_webhook_address_is_never_flagged(gap_app, admin, sandbox):
    flow_id = sandbox.create()["flowId"]
    sandbox.control(flow_id, "accept")
    gap_app.extensions["portal.clock"].past_the_grace()
    assert gap_warning(admin.get(f"/flows/{flow_id}").text) is None
    written(gap_app)
    assert "gaps: 0 (checked 0" in sync(gap_app)


def test_events_for_a_flow_the_service_does_not_know_are_flagged(gap_app, admin, sandbox):
    stranger, unlisted = str(uuid.uuid4()), str(uuid.uuid4())
    for flow_id in (stranger, unlisted):
        data = {"flowId": flow_id, "referenceId": "LA-99999", "status": "Opened"}
        payload = {"id": str(uuid.uuid4()), "type": "flow.status_changed", "timestamp": T0.isoformat(), "data": data}
        assert deliver_signed(gap_app, payload).status_code == 200
    written(gap_app)

    assert admin.get(f"/flows/{stranger}").status_code == 404  # the service answers 404: flagged
    assert row(gap_app, stranger).unknown_at is not None and row(gap_app, unlisted).unknown_at is None
    events = admin.get(f"/events?flow={stranger}").text
    assert "The Flow Service does not know this flow" in events
    with gap_app.app_context():
        event_row = db.session.query(WebhookEvent).filter_by(flow_id=stranger).one().id
    assert 'data-testid="unknown-flow"' in admin.get(f"/events/{event_row}").text
    assert "does not know" not in admin.get(f"/events?flow={unlisted}").text

    sync(gap_app)  # not every list walked: the unlisted flow is not judged
    assert row(gap_app, unlisted).unknown_at is None
    gap_app.extensions["portal.clock"].past_the_grace()
    assert "unknown to the service 1" in sync(gap_app, "--all")
    page = admin.get("/admin/gaps").text
    for flow_id in (stranger, unlisted):
        assert f'<tr data-flow-id="{flow_id}">' in page
        assert f'href="/events?flow={flow_id}">1 event<' in page


def test_refresh_needs_sign_in_and_a_csrf_token(gap_app, make_app, sandbox):
    flow_id = sandbox.create()["flowId"]
    anonymous = gap_app.test_client().post(f"/flows/{flow_id}/refresh")  # (CSRF off in gap_app)
    assert anonymous.status_code == 302 and "/login" in anonymous.headers["Location"]
    app = make_app()
    add_user(app, "vera", "viewer")
    client = app.test_client()
    sign_in_page = client.get("/login").text
    token = re.search(r'name="csrf_token" type="hidden" value="([^"]+)"', sign_in_page)[1]
    client.post("/login", data={"username": "vera", "password": PASSWORD, "csrf_token": token})
    assert client.post(f"/flows/{flow_id}/refresh").status_code == 400


def test_the_gaps_page_is_for_admins_and_ignores_bad_positions(gap_app, admin):
    assert admin.get("/admin/gaps?before=x&unknown_before=-1").status_code == 200
    add_user(gap_app, "vic", "viewer")
    client = gap_app.test_client()
    sign_in(client, "vic")
    assert client.get("/admin/gaps").status_code == 403


def test_a_refresh_the_service_fails_shows_the_upstream_error_page(gap_app, admin, sandbox):
    flow_id = sandbox.create()["flowId"]
    sandbox.fault(mode="error", status=503, count=20)
    answer = admin.post(f"/flows/{flow_id}/refresh")
    assert answer.status_code >= 500 and "Location" not in answer.headers
    requests_delete = sandbox.api("DELETE", "/sandbox/faults", token=False)
    assert requests_delete.status_code == 204
    assert admin.post(f"/flows/{flow_id}/refresh").status_code == 302


def test_a_webhook_address_no_parser_reads_is_not_the_portal_s():
    """A service's webhookUrl of "http://[" raised from `urlsplit` wherever gaps were judged."""
    from portal.flowindex.gaps import same_address

    assert same_address("http://[", "http://127.0.0.1:5000/webhooks/flow") is False
