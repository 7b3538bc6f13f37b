"""`flows sync`: the service's pages into the flow index, against the sandbox and the stand-in service.

Counts and rows are checked against what the service itself holds; the lease is checked with two
syncs at once and with an injected clock, never with sleeps.
"""

import html
import re
import threading
from datetime import UTC, datetime, timedelta

import pytest
from altservice import PORTAL_SETTINGS as ALT_SETTINGS
from altservice import SEED_TIME, seed_flows
from sqlalchemy import func, select
from support import run_in_threads, signed_in_as

from portal.extensions import db
from portal.flowapi import CreatedFlow
from portal.flowindex.feed import saw_created, saw_page
from portal.flowindex.keys import read_national_id
from portal.flowindex.sync import (
    ALL,
    LEASE_NAME,
    LEASE_TTL,
    DatabaseLease,
    LeaseLost,
    SyncLocked,
    SyncStopped,
    run_sync,
)
from portal.models import FlowRecord

KEY = b"test-index-key-0123456789"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
NAMES = ("Nordmann", "Bjørnstad", "Ødegård", "Lindqvist", "Virtanen", "Åberg")


def sync(app, *args):
    return app.test_cli_runner().invoke(args=["flows", "sync", *args])


def index_rows(app) -> dict[str, FlowRecord]:
    with app.app_context():
        records = db.session.scalars(select(FlowRecord)).all()
        db.session.expunge_all()
    return {record.flow_id: record for record in records}


def sandbox_flows(sandbox) -> dict:
    """The sandbox's own flows (every organization's), by id."""
    return {flow.id: flow for flow in sandbox.app.extensions["flow_sandbox"].store.newest(10_000)}


def assert_index_matches(app, sandbox):
    """Every sandbox flow has one row saying what the service's list says of it."""
    rows, flows = index_rows(app), sandbox_flows(sandbox)
    assert set(rows) == set(flows)
    for flow_id, flow in flows.items():
        row = rows[flow_id]
        said = (row.consent_status, row.archived, row.reference_id, row.national_id_hash)
        assert said == (
            flow.status,
            flow.archived,
            flow.reference_id,
            read_national_id(flow.national_id).keyed_hash(KEY),
        )
        assert abs(row.created_at - flow.created_at) < timedelta(milliseconds=1)
        assert row.gone_at is None and row.listed_at is not None


def row_count(app) -> tuple[int, int]:
    """Rows in the index, and distinct flow ids among them."""
    with app.app_context():
        return db.session.execute(select(func.count(), func.count(FlowRecord.flow_id.distinct()))).one()


@pytest.fixture
def sync_app(make_app, database_url):
    return make_app(database=database_url, WTF_CSRF_ENABLED=False)  # a page read after a sync signs in by a form


@pytest.fixture
def alt_app(make_app, database_url, alt):
    """The portal against the stand-in service, which tests may take flows away from."""
    return make_app(
        database=database_url,
        sandbox_url=alt.url,
        **ALT_SETTINGS,
    )


def reseed(alt, **options):
    """Replace the stand-in's flows: `reseed(alt, current=230, archived=20)`."""
    with alt.lock:
        alt.flows = seed_flows(options.get("current", 23), options.get("archived", 4))


# -- what a sync writes ------------------------------------------------------------------------


def test_sync_brings_created_changed_archived_and_cancelled_flows_into_the_index(sync_app, sandbox):
    flows = [sandbox.create(last_name=name)["flowId"] for name in NAMES]
    first = sync(sync_app, "--all")
    assert first.exit_code == 0, first.output
    assert "seen 6, new 6, changed 0, gone 0," in first.output
    assert_index_matches(sync_app, sandbox)

    for flow_id, action in zip(flows, ("open", "accept", "reject", "archive", "cancel"), strict=False):
        assert sandbox.control(flow_id, action).status_code == 200
    added = [sandbox.create(national_id="811218-9876")["flowId"] for _ in range(2)]
    second = sync(sync_app, "--all")
    assert second.exit_code == 0, second.output
    assert "seen 8, new 2, changed 5, gone 0," in second.output
    assert_index_matches(sync_app, sandbox)
    rows = index_rows(sync_app)
    assert {rows[flow_id].change_source for flow_id in flows[:5] + added} == {"sync"}
    assert (rows[flows[3]].archived, rows[flows[4]].archived, rows[flows[5]].archived) == (True, True, False)
    assert rows[added[0]].country == "se" and rows[added[0]].national_id_masked == "811218-••••"


def test_a_second_sync_with_nothing_changed_reports_nothing_new(sync_app, sandbox):
    for name in NAMES[:3]:
        sandbox.create(last_name=name)
    assert "seen 3, new 3, changed 0" in sync(sync_app).output
    again = sync(sync_app)
    assert again.exit_code == 0, again.output
    assert "seen 3, new 0, changed 0, gone not counted (only --all walks every flow)" in again.output
    summary, gaps = again.output.splitlines()  # without a terminal: the summary and the gap check, no progress
    assert summary.startswith("synced current flows") and gaps.startswith("gaps: 0 ")
    assert row_count(sync_app) == (3, 3)


def test_archived_walks_only_archived_flows(sync_app, sandbox):
    kept, archived = sandbox.create()["flowId"], sandbox.create()["flowId"]
    sandbox.control(archived, "archive")
    result = sync(sync_app, "--archived")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("synced archived flows: seen 1, new 1")
    assert set(index_rows(sync_app)) == {archived} and kept not in index_rows(sync_app)


# -- gone --------------------------------------------------------------------------------------


def test_flows_the_service_no_longer_lists_are_marked_gone_until_listed_again(alt_app, alt):
    assert "seen 27, new 27, changed 0, gone 0," in sync(alt_app, "--all").output
    current, archived = alt.find(alt.current_ids()[3]), alt.find(alt.archived_ids()[1])
    with alt.lock:
        alt.flows.remove(current)
        alt.flows.remove(archived)
    result = sync(alt_app, "--all")
    assert result.exit_code == 0, result.output
    assert "seen 25, new 0, changed 0, gone 2," in result.output
    gone = {flow_id for flow_id, row in index_rows(alt_app).items() if row.gone_at is not None}
    assert gone == {current.id, archived.id}

    with alt.lock:
        alt.flows.insert(3, current)
    back = sync(alt_app, "--all")
    assert "seen 26, new 0" in back.output and "gone 0," in back.output
    assert index_rows(alt_app)[current.id].gone_at is None
    assert index_rows(alt_app)[archived.id].gone_at is not None


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ((), "only --all walks every flow"),
        (("--archived",), "only --all walks every flow"),
        (("--all", "--since", "2026-11-01T00:00:00Z"), "--since walks only the newest flows"),
    ],
)
def test_a_partial_walk_counts_no_flow_gone(alt_app, alt, args, reason):
    sync(alt_app, "--all")
    with alt.lock:
        alt.flows = [flow for flow in alt.flows if flow.number % 3]  # a third of each list taken away
    result = sync(alt_app, *args)
    assert result.exit_code == 0, result.output
    assert f"gone not counted ({reason})" in result.output
    assert all(row.gone_at is None for row in index_rows(alt_app).values())


def test_a_flow_created_during_a_full_sync_is_not_marked_gone(sync_app, sandbox):
    for _ in range(7):
        sandbox.create()
    created = {}

    def create_meanwhile(report):
        if report.pages == 1:  # the walk is past the newest flows now
            flow = sandbox.create(last_name="Bjørnstad")
            created["id"] = flow["flowId"]
            saw_created(CreatedFlow(flow["flowId"], flow["referenceId"], {}), "15108695088", "no", "Bjørnstad", "kari")
            assert sync_app.extensions["flow_index"].flush(10)

    with sync_app.app_context():
        report = run_sync(ALL, progress=create_meanwhile, limit=5)
    assert report.gone == 0
    row = index_rows(sync_app)[created["id"]]
    assert row.gone_at is None and row.listed_at is not None and row.created_by == "kari"
    assert_index_matches(sync_app, sandbox)


# -- paging ------------------------------------------------------------------------------------


@pytest.mark.parametrize("paging", ["cursor", "cursor_inclusive", "next_cursor", "next_link", "links_next", "offset"])
def test_every_paging_style_reaches_every_flow_once(alt_app, alt, paging):
    reseed(alt, current=230, archived=20)
    alt.set(paging=paging)
    result = sync(alt_app, "--all")
    assert result.exit_code == 0, result.output
    assert "seen 250, new 250, changed 0," in result.output
    assert row_count(alt_app) == (250, 250)
    assert set(index_rows(alt_app)) == {flow.id for flow in alt.flows}
    if paging == "offset":
        assert "gone not counted (the Flow Service pages by offset" in result.output


def test_a_service_that_repeats_a_page_stops_the_sync(alt_app, alt):
    reseed(alt, current=230, archived=20)
    assert sync(alt_app, "--all").exit_code == 0
    alt.set(paging="ignore_cursor")
    calls = alt.counts["list"]
    result = sync(alt_app, "--all")
    assert result.exit_code != 0
    assert "the Flow Service sent the same page again" in result.output
    assert "written before it stopped: seen 100, new 0, changed 0, pages 1" in result.output
    assert alt.counts["list"] - calls == 2, "the walk stops at the repeated page"
    assert all(row.gone_at is None for row in index_rows(alt_app).values()), "a stopped walk marks nothing gone"


@pytest.mark.parametrize(("paging", "calls"), [("empty_endless", 3), ("empty_then_seen", 4)])
def test_pages_without_a_new_flow_that_keep_saying_more_follow_stop_the_sync(alt_app, alt, paging, calls):
    """Each with a new next position, nothing else would end the walk: it went on for ever, holding the lock (empty
    pages; then empty pages with a flow walked already between them, found by a re-check)."""
    alt.set(paging=paging)
    result = sync(alt_app, "--all")
    assert result.exit_code != 0
    assert "sent 3 pages in a row without a flow not walked already (empty, or repeating)" in result.output
    assert alt.counts["list"] == calls


def test_a_service_whose_pages_hold_fewer_flows_than_a_sync_asks_is_walked_at_its_size(alt_app, alt):
    """The spec leaves a page's most open: a service that refuses 100 per page stopped every sync."""
    reseed(alt, current=35, archived=5)
    alt.set(max_limit=10)
    result = sync(alt_app, "--all")
    assert result.exit_code == 0, result.output
    assert "seen 40, new 40" in result.output


def test_since_stops_the_walk_at_older_flows(alt_app, alt):
    reseed(alt, current=300, archived=0)
    since = SEED_TIME - timedelta(minutes=41 * 150)  # the 151st flow was created then; later ones are older
    result = sync(alt_app, "--since", since.isoformat())
    assert result.exit_code == 0, result.output
    assert "seen 200, new 200" in result.output and "pages 2," in result.output
    assert alt.counts["list"] == 2
    assert "gone not counted (only --all walks every flow)" in result.output


def test_the_service_failing_gives_one_line_and_a_non_zero_exit(alt_app, alt):
    alt.set(list_status=500)
    failed = sync(alt_app, "--all")
    assert failed.exit_code != 0
    assert len(failed.output.strip().splitlines()) == 1
    assert failed.output.startswith("Error: flows sync stopped: ") and "The flow store did not answer" in failed.output
    alt.set(list_status=None)
    again = sync(alt_app, "--all")
    assert again.exit_code == 0 and "seen 27, new 27" in again.output, "the failed sync released the lock"


def test_a_failure_in_the_middle_keeps_what_was_fetched(alt_app, alt):
    def fail_after_first_page(report):
        alt.set(list_status=500)

    with alt_app.app_context(), pytest.raises(SyncStopped) as stopped:
        run_sync(ALL, progress=fail_after_first_page, limit=10)
    report = stopped.value.report
    assert stopped.value.error is not None and report.pages >= 2, "pages fetched before the failure are written"
    assert row_count(alt_app) == (report.seen, report.seen) and report.seen >= 20


# -- the lease ---------------------------------------------------------------------------------


def test_two_syncs_at_once_one_runs_the_other_reports_the_lock(sync_app, sandbox):
    flows = [sandbox.create()["flowId"] for _ in range(12)]
    accepted_meanwhile = flows[-7]  # newest first, five a page: on the second page
    loser_done, outcomes = threading.Event(), []

    def winner_pauses(report):
        if report.pages == 1:
            assert loser_done.wait(10), "the second sync never tried"
            # The second page is fetched; now the flow changes and the list page writes the news first.
            sandbox.control(accepted_meanwhile, "accept")
            saw_page(sync_app.extensions["flow_client"].list_flows(limit=10), archived=False)
            assert sync_app.extensions["flow_index"].flush(10)

    def one_sync():
        with sync_app.app_context():
            try:
                outcomes.append(run_sync(ALL, progress=winner_pauses, limit=5))
            except SyncLocked as locked:
                outcomes.append(locked)
                loser_done.set()

    assert run_in_threads(one_sync, 2) == []
    locked = [outcome for outcome in outcomes if isinstance(outcome, SyncLocked)]
    ran = [outcome for outcome in outcomes if not isinstance(outcome, SyncLocked)]
    assert len(locked) == 1 and len(ran) == 1
    assert locked[0].holder and "another flows sync holds the lock" in str(locked[0])
    assert ran[0].seen == 12 and ran[0].gone == 0
    assert row_count(sync_app) == (12, 12)
    assert index_rows(sync_app)[accepted_meanwhile].consent_status == "Accepted", "the newer status was kept"
    assert_index_matches(sync_app, sandbox)


def test_an_expired_lease_is_taken_over_and_a_live_one_is_respected(sync_app, sandbox):
    sandbox.create()
    now = [T0]
    with sync_app.app_context():
        crashed = DatabaseLease(LEASE_NAME, clock=lambda: now[0], holder="crashed-host:4242:dead")
        assert crashed.acquire()
        with pytest.raises(SyncLocked) as locked:
            run_sync(clock=lambda: T0 + LEASE_TTL - timedelta(seconds=1))
        assert locked.value.holder == "crashed-host:4242:dead"
        assert row_count(sync_app) == (0, 0), "a sync that finds the lock held writes nothing"

        now[0] = T0 + LEASE_TTL + timedelta(seconds=1)
        report = run_sync(clock=lambda: now[0])
        assert report.new == 1
        assert crashed.current().holder is None, "the sync released the lease it took over"
        with pytest.raises(LeaseLost):
            crashed.renew()


def test_a_sync_that_lost_its_lease_stops_writing(sync_app, sandbox):
    for _ in range(12):
        sandbox.create()
    now = [T0]

    def stall_past_the_lease(report):
        if report.pages == 1:
            now[0] = T0 + LEASE_TTL + timedelta(seconds=1)
            assert DatabaseLease(LEASE_NAME, clock=lambda: now[0], holder="other-host:1:beef").acquire()

    with sync_app.app_context(), pytest.raises(SyncStopped) as stopped:
        run_sync(ALL, clock=lambda: now[0], progress=stall_past_the_lease, limit=5)
    assert "another sync took the lock over" in stopped.value.reason
    assert row_count(sync_app) == (5, 5), "nothing is written once the lease is someone else's"
    with sync_app.app_context():
        assert DatabaseLease(LEASE_NAME).current().holder == "other-host:1:beef"


def test_the_command_reports_a_held_lock_and_exits_0(sync_app, sandbox):
    sandbox.create()
    with sync_app.app_context():
        assert DatabaseLease(LEASE_NAME, ttl=timedelta(days=1), holder="other-host:1:cafe").acquire()
    result = sync(sync_app, "--all")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("another flows sync holds the lock (other-host:1:cafe, until ")
    assert row_count(sync_app) == (0, 0)


# -- the command -------------------------------------------------------------------------------


def test_progress_is_reported_for_every_write(sync_app, sandbox):
    for _ in range(11):
        sandbox.create()
    pages = []
    with sync_app.app_context():
        report = run_sync(progress=lambda report: pages.append((report.pages, report.seen)), limit=5)
    # A write may carry several pages (fetched while the previous write ran); the counts only grow.
    assert pages == sorted(pages) and pages[-1] == (3, 11) and report.pages == 3
    assert all(seen == min(5 * written, 11) for written, seen in pages)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--archived", "--all"), "use --archived or --all, not both"),
        (("--since", "last tuesday"), "use an ISO 8601 date or time"),
    ],
)
def test_unusable_options_are_refused(sync_app, args, message):
    result = sync(sync_app, *args)
    assert result.exit_code == 2 and message in result.output


def test_details_bring_names_the_list_does_not_carry(sync_app, sandbox):
    flows = {sandbox.create(last_name=name)["flowId"]: name for name in NAMES}
    plain = sync(sync_app)
    assert plain.exit_code == 0 and "fetched for names" not in plain.output
    assert {row.last_name for row in index_rows(sync_app).values()} == {None}, "list items carry no name"
    named = sync(sync_app, "--details", "4")
    assert named.exit_code == 0 and "4 flow page(s) fetched for names" in named.output, named.output
    rows = index_rows(sync_app)
    newest = sorted(flows, key=lambda flow_id: rows[flow_id].created_at, reverse=True)[:4]
    assert {rows[flow_id].last_name for flow_id in newest} == {flows[flow_id] for flow_id in newest}
    assert all(rows[flow_id].lifecycle == "active" for flow_id in newest), "the page tells the lifecycle too"
    # Told by the sync, not by a flow page someone opened (the lists said "the flow's page, 1 min. ago" for flows
    # nobody had opened; found by a new user).
    assert {rows[flow_id].lifecycle_source for flow_id in newest} == {"sync_detail"}
    # Said as a person reads it, not by the administrator's command (a new user's walk).
    page = signed_in_as(sync_app).get("/flows", query_string={"q": flows[newest[0]]}).text  # from the index
    consent, lifecycle = re.findall(r'<small class="status-source" title="[^"]*">\(([^<]*)\)</small>', page)[:2]
    assert html.unescape(consent).startswith("a sync with the Flow Service, "), consent
    assert html.unescape(lifecycle).startswith("a sync with the Flow Service, flow by flow, "), lifecycle
    rest = sync(sync_app, "--details", "100")
    assert "2 flow page(s) fetched for names" in rest.output
    assert all(row.last_name_key for row in index_rows(sync_app).values())
    assert "fetched for names" not in sync(sync_app, "--details", "100").output, "nothing left to fetch"


def test_a_service_that_ignores_the_archived_filter_does_not_archive_the_current_flows(alt_app, alt):
    """Its archived list is the current one: a sync stored every current flow as archived (found by a re-check)."""
    reseed(alt, current=30, archived=5)
    alt.set(ignore_archived=True)
    result = sync(alt_app, "--all")
    assert result.exit_code == 0, result.output
    rows = index_rows(alt_app)
    archived = sorted(flow.reference_id for flow in alt.flows if not flow.archived and rows[flow.id].archived)
    assert archived == []
