"""The flow index: rows from every source, and the version rule (newer wins, older never overwrites)."""

import json
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import psycopg
import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url
from support import add_user, create_form, sign_in, signals_aimed_at

from portal.extensions import db
from portal.flowindex import writer as index_writer
from portal.flowindex.keys import name_key, read_national_id
from portal.flowindex.observations import DETAIL, LIST, SYNC, WEBHOOK, Observation, from_event
from portal.flowindex.store import apply_observations, index_record
from portal.models import FlowRecord

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
KEY = b"test-index-key-0123456789"


def seen(app, flow_id: str) -> FlowRecord | None:
    """The flow's index row once every handed-over write is done."""
    assert app.extensions["flow_index"].flush(10), "the index writer did not finish"
    with app.app_context():
        record = index_record(flow_id)
        if record is not None:
            db.session.expunge(record)
        return record


def observe(app, *observations: Observation):
    with app.app_context():
        return apply_observations(observations, app.extensions["portal.settings"].index_key)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


@pytest.fixture
def index_app(make_app, database_url):
    return make_app(database=database_url, WTF_CSRF_ENABLED=False)


# -- the keys ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "same_as"),
    [
        ("151086 95088", "15108695088"),
        ("198112189876", "811218-9876"),
        ("19811218-9876", "8112189876"),
        ("131052-308t", "131052-308T"),
    ],
)
def test_every_written_form_of_a_national_id_has_one_keyed_hash(written, same_as):
    assert read_national_id(written).keyed_hash(KEY) == read_national_id(same_as).keyed_hash(KEY)
    assert read_national_id(written).keyed_hash(KEY) != read_national_id(written).keyed_hash(b"another key")


def test_a_national_id_gives_country_and_birth_date():
    number = read_national_id("131052-308T")
    assert (number.country, number.birth_date.isoformat()) == ("fi", "1952-10-13")
    assert number.masked == "131052-••••"
    assert read_national_id("12345678901") is None and read_national_id("") is None


@pytest.mark.parametrize(
    ("synthetic", "country", "born"),
    [
        ("16822548834", "no", "1925-02-16"),  # Tenor: month + 80
        ("11812448848", "no", "1924-01-11"),
        ("010190-900P", "fi", "1990-01-01"),  # Finnish individual numbers 900-999
        ("150505A9034", "fi", "2005-05-15"),
        ("19900602-2397", "se", "1990-06-02"),  # Skatteverket's test personnummer
    ],
)
def test_the_synthetic_ids_the_create_form_offers_are_read_as_any_other(synthetic, country, born):
    """Created with one, a flow must be found by it, masked by it and asked about by it (access log, subjects)."""
    number = read_national_id(synthetic)
    assert (number.country, number.birth_date.isoformat()) == (country, born)
    assert read_national_id(synthetic[:-1] + ("0" if synthetic[-1] != "0" else "1")) is None  # its check still counts


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Bjørnstad", "bjornstad"),
        ("ÆRØ-Ölund", "aero-olund"),
        ("Åsa  Lindqvist", "asa lindqvist"),
        ("<b>", "b"),
        ("O'Brien", "obrien"),
        ("O’Brien", "obrien"),
        ("Иванов", "иванов"),
        ("إبراهيم", "ابراهيم"),
        ("Παπαδόπουλος", "παπαδοπουλοσ"),
        ("a_b%c*d", "a b c d"),
    ],
)
def test_name_keys_fold_case_and_nordic_letters(name, key):
    assert name_key(name) == key


# -- the version rule --------------------------------------------------------------------------


def test_an_old_webhook_after_a_newer_detail_changes_nothing(index_app):
    detail = Observation("f-1", DETAIL, at(10), at(9), version=5, lifecycle="completed", updated_at=at(9))
    old_event = Observation("f-1", WEBHOOK, at(11), at(2), version=3, consent_status="Opened", lifecycle="active")
    observe(index_app, detail)
    result = observe(index_app, old_event)
    record = seen(index_app, "f-1")
    assert (record.version, record.lifecycle, record.consent_status) == (5, "completed", None)
    assert result.changed == set()


def test_an_old_event_without_a_version_loses_to_a_newer_time(index_app):
    observe(index_app, Observation("f-2", LIST, at(10), at(10), consent_status="Accepted"))
    observe(index_app, Observation("f-2", WEBHOOK, at(11), at(5), consent_status="Opened"))
    assert seen(index_app, "f-2").consent_status == "Accepted"


def test_an_event_dated_after_it_arrived_counts_as_of_its_arrival(index_app):
    future = from_event(
        "f-9", "flow.status_changed", "Rejected", datetime(2099, 1, 1, tzinfo=timezone.utc), None, {}, at(5)
    )
    assert future.state_at == at(5)
    observe(index_app, Observation("f-9", LIST, at(1), at(1), consent_status="Opened"))
    observe(index_app, future)
    assert seen(index_app, "f-9").consent_status == "Rejected", "it came after what the list said"
    observe(index_app, Observation("f-9", LIST, at(10), at(10), consent_status="Accepted"))
    assert seen(index_app, "f-9").consent_status == "Accepted", "what the service said later is not outweighed"


def test_a_newer_version_wins_and_says_where_it_came_from(index_app):
    observe(index_app, Observation("f-3", DETAIL, at(1), at(1), version=2, lifecycle="active"))
    observe(
        index_app,
        Observation("f-3", WEBHOOK, at(3), at(2), version=3, consent_status="Accepted", lifecycle="completed"),
    )
    record = seen(index_app, "f-3")
    assert (record.version, record.consent_status, record.lifecycle) == (3, "Accepted", "completed")
    assert (record.status_source, record.lifecycle_source, record.change_source) == ("webhook", "webhook", "webhook")


def test_an_old_observation_still_fills_in_what_never_changes(index_app):
    observe(index_app, Observation("f-4", DETAIL, at(10), at(10), version=4, lifecycle="completed"))
    observe(
        index_app, Observation("f-4", LIST, at(11), at(1), version=1, reference_id="LA-1", national_id="15108695088")
    )
    record = seen(index_app, "f-4")
    assert (record.version, record.reference_id, record.country) == (4, "LA-1", "no")


def test_a_webhook_for_an_unknown_flow_makes_a_stub_that_a_list_confirms(index_app):
    observe(index_app, Observation("f-5", WEBHOOK, at(1), at(1), consent_status="Opened"))
    assert seen(index_app, "f-5").stub is True
    observe(index_app, Observation("f-5", LIST, at(2), at(2), consent_status="Opened"))
    record = seen(index_app, "f-5")
    assert record.stub is False and record.listed_at == at(2)


def test_one_batch_with_the_same_flow_twice_keeps_the_newest(index_app):
    first = Observation("f-6", LIST, at(1), at(1), consent_status="Opened")
    second = Observation("f-6", WEBHOOK, at(2), at(2), consent_status="Accepted")
    result = observe(index_app, first, second)
    assert seen(index_app, "f-6").consent_status == "Accepted" and result.new == {"f-6"}


def hold_flow_row(database_url: str, flow_id: str, consent_status: str) -> Callable[[], None]:
    """Another writer mid-transaction: it has changed the flow's row and holds it until the function returned
    commits."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        connection = sqlite3.connect(url.database, isolation_level=None)
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("UPDATE flow_index SET consent_status = ? WHERE flow_id = ?", (consent_status, flow_id))
        return lambda: (connection.execute("COMMIT"), connection.close())
    holder = psycopg.connect(url.set(drivername="postgresql").render_as_string(hide_password=False))
    holder.execute("UPDATE flow_index SET consent_status = %s WHERE flow_id = %s", (consent_status, flow_id))
    return lambda: (holder.commit(), holder.close())


def reaching_the_rows(engine) -> threading.Event:
    """Set once a batch has asked to hold index rows (and may be waiting for them) or has read them."""
    reached = threading.Event()

    def before(connection, cursor, statement: str, *args):
        if statement.startswith("UPDATE flow_index") or (statement.startswith("SELECT") and "FOR UPDATE" in statement):
            reached.set()

    def after(connection, cursor, statement: str, *args):
        if statement.startswith("SELECT") and "FROM flow_index" in statement:
            reached.set()

    event.listen(engine, "before_cursor_execute", before)
    event.listen(engine, "after_cursor_execute", after)
    return reached


def test_a_batch_waits_for_another_writer_of_its_flows_and_loses_none_of_its_change(index_app, database_url):
    """No lost update: a batch reads a flow's row only once no other transaction is changing it (a sync or
    another worker's writer), so what it writes back keeps that transaction's change."""
    observe(index_app, Observation("f-race", LIST, at(1), at(1), consent_status="Opened", lifecycle="active"))
    commit_other = hold_flow_row(database_url, "f-race", "Accepted")
    with index_app.app_context():
        reached = reaching_the_rows(db.engine)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            observe(index_app, Observation("f-race", DETAIL, at(2), at(2), lifecycle="completed"))
        except Exception as error:  # noqa: BLE001 - reported by the assertion below
            failed.append(error)

    batch = threading.Thread(target=write)
    batch.start()
    try:
        assert reached.wait(20), "the batch never reached the index rows"
    finally:
        commit_other()
    batch.join(20)
    assert not batch.is_alive() and failed == []
    record = seen(index_app, "f-race")
    assert (record.consent_status, record.lifecycle) == ("Accepted", "completed")


# -- every source, through the portal ----------------------------------------------------------


def test_a_list_page_fills_the_index_without_full_national_ids(index_app, sandbox):
    created = sandbox.api(
        "POST",
        "/api/flows",
        json={"nationalId": "15108695088", "lastName": "Bjørnstad", "redirectUrl": "https://a.example/"},
    ).json()
    staff = index_app.test_client()
    sign_in(staff, add_user(index_app, role="viewer"))
    assert staff.get("/flows").status_code == 200
    record = seen(index_app, created["flowId"])
    number = read_national_id("15108695088")
    assert record.consent_status == "Unopened" and record.status_source == "list"
    assert record.national_id_hash == number.keyed_hash(b"test-index-key-0123456789")
    assert record.national_id_masked == "151086•••••" and record.birth_date.isoformat() == "1986-10-15"
    with index_app.app_context():
        stored = json.dumps([list(row) for row in db.session.execute(db.select(FlowRecord.__table__))], default=str)
    assert "15108695088" not in stored, "the index never keeps a full national id"
    staff.get(f"/flows/{created['flowId']}")
    record = seen(index_app, created["flowId"])
    assert (record.last_name, record.last_name_key, record.lifecycle) == ("Bjørnstad", "bjornstad", "active")
    assert record.version == 1 and record.flow_number is not None


def test_a_flow_created_in_the_portal_is_indexed_with_who_created_it(index_app):
    staff = index_app.test_client()
    username = add_user(index_app, role="operator")
    sign_in(staff, username)
    answer = create_form(staff, last_name="Ødegård")
    flow_id = answer.headers["Location"].rsplit("/", 1)[-1]
    record = seen(index_app, flow_id)
    assert (record.created_by, record.change_source, record.consent_status) == (username, "create", "Unopened")
    assert record.last_name_key == "odegard" and record.country == "no"


def test_the_writer_skips_a_flow_seen_again_unchanged_within_a_minute(index_app):
    writer = index_app.extensions["flow_index"]
    first = Observation("f-7", LIST, at(0), at(0), consent_status="Opened")
    writer.submit(lambda: (first,))
    writer.submit(lambda: (Observation("f-7", LIST, at(0.5), at(0.5), consent_status="Opened"),))
    assert seen(index_app, "f-7").seen_at == at(0), "an unchanged flow seen again at once is not rewritten"
    writer.submit(lambda: (Observation("f-7", LIST, at(2), at(2), consent_status="Opened"),))
    assert seen(index_app, "f-7").seen_at == at(2), "after a minute it is written again (seen_at moves on)"
    writer.submit(lambda: (Observation("f-7", LIST, at(2.1), at(2.1), consent_status="Accepted"),))
    assert seen(index_app, "f-7").consent_status == "Accepted", "a change is always written"


def test_a_writer_whose_waits_signals_interrupt_still_writes_every_batch(index_app, monkeypatch):
    """A signal cutting short the busy writer's wait for more work must not make it wait for the next job."""
    monkeypatch.setattr(index_writer, "GATHER_SECONDS", 0.001)
    writer = index_app.extensions["flow_index"]
    writer.submit(lambda: ())
    assert writer.flush(10)
    with signals_aimed_at(writer._thread):
        for number in range(300):
            writer.submit(lambda number=number: (Observation(f"f-{number}", LIST, at(0), at(0)),))
            assert writer.flush(10), f"batch {number} was not written"
    assert seen(index_app, "f-299") is not None


@pytest.mark.parametrize("version", [10**30, "9" * 18, -(2**31) - 1])
def test_a_version_no_integer_column_holds_is_left_out_not_an_error(version):
    observation = from_event("f-1", "flow.status_changed", "Opened", None, None, {"data": {"version": version}}, at(1))
    assert observation.version is None and observation.consent_status == "Opened"


# -- consent milestones and what events told (insights, gap detection) --------------------------


def test_milestones_take_the_earliest_time_any_source_puts_on_them(index_app):
    listed = Observation("f-m", LIST, at(30), at(30), consent_status="Accepted")
    observe(index_app, listed)
    record = seen(index_app, "f-m")
    assert record.opened_at == record.decided_at == at(30), "a list only says it had happened by then"
    late_events = (
        Observation("f-m", WEBHOOK, at(31), at(5), consent_status="Opened"),
        Observation("f-m", WEBHOOK, at(31), at(12), consent_status="Accepted"),
    )
    observe(index_app, *late_events)
    record = seen(index_app, "f-m")
    assert (record.opened_at, record.decided_at) == (at(5), at(12)), "a late event moves each back to its own time"
    observe(index_app, Observation("f-m", DETAIL, at(40), at(40), updated_at=at(20), lifecycle="completed"))
    assert seen(index_app, "f-m").decided_at == at(12), "a retrieve carries no consent status: no milestone"


def test_an_unopened_flow_has_no_milestones(index_app):
    observe(index_app, Observation("f-u", LIST, at(1), at(1), consent_status="Unopened"))
    record = seen(index_app, "f-u")
    assert record.opened_at is None and record.decided_at is None


def test_heard_keeps_the_highest_version_and_the_newest_event(index_app):
    observe(
        index_app,
        Observation("f-h", WEBHOOK, at(3), at(3), version=3, consent_status="Opened"),
        Observation("f-h", WEBHOOK, at(4), at(1), version=1, consent_status="Unopened"),
    )
    record = seen(index_app, "f-h")
    assert (record.heard_version, record.heard_at, record.heard_status) == (3, at(3), "Opened")
    observe(index_app, Observation("f-h", LIST, at(9), at(9), consent_status="Accepted"))
    record = seen(index_app, "f-h")
    assert (record.heard_version, record.heard_status) == (3, "Opened"), "only webhook events are heard"


def test_the_migration_makes_the_stored_name_keys_again(make_app, database_url):
    from flask_migrate import downgrade, upgrade
    from sqlalchemy import text

    app = make_app(database=database_url)
    insert = text(
        "INSERT INTO flow_index (flow_id, last_name, last_name_key, changed_at, change_source, seen_at, stub)"
        " VALUES (:flow_id, :name, :key, CURRENT_TIMESTAMP, 'list', CURRENT_TIMESTAMP, false)"
    )
    old_keys = {"a": ("O’Brien", None), "b": ("O'Brien", "o'brien"), "c": ("Иванова", None), "d": ("Berg", "berg")}
    with app.app_context():
        downgrade(revision="0014_last_change_sort")
        for flow_id, (name, key) in old_keys.items():
            db.session.execute(insert, {"flow_id": flow_id, "name": name, "key": key})
        db.session.commit()
        upgrade()
        keys = dict(db.session.execute(text("SELECT flow_id, last_name_key FROM flow_index")).all())
    assert keys == {"a": "obrien", "b": "obrien", "c": "иванова", "d": "berg"}


def test_flows_sync_hashes_each_id_again_under_a_changed_index_key(index_app):
    """Found by an operator: the README said a changed PORTAL_INDEX_KEY leaves ids unfindable "until the next flows
    sync", but a row hashed once was never hashed again, so no sync brought a person's flows back to a search."""
    new_key, now = b"another-index-key-0123456789", datetime.now(timezone.utc)
    number = read_national_id("15108695088")

    def seen(source: str, key: bytes) -> str:
        with index_app.app_context():
            apply_observations([Observation("f-1", source, now, now, national_id="15108695088")], key)
            return index_record("f-1").national_id_hash

    assert seen(LIST, KEY) == number.keyed_hash(KEY)
    assert seen(LIST, new_key) == number.keyed_hash(KEY), "a list or a page reads the id once"
    assert seen(SYNC, new_key) == number.keyed_hash(new_key), "flows sync under the key of now"
