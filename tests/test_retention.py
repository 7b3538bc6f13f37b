"""Retention: each kind of record removed once older than its setting, idempotent, one run at a time."""

import hashlib
import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, insert, select
from support import portal_config

from portal.extensions import db
from portal.flowindex.sync import DatabaseLease
from portal.models import AccessEntry, AuditEntry, FlowRecord, RejectedDelivery, RejectionTally, WebhookEvent
from portal.retention import BATCH, LEASE_NAME, RetentionLocked, apply_retention, prune_audit
from portal.settings import SettingsError, load_settings
from portal.webhooks.store import prune_events, was_pruned

NOW = datetime(2026, 11, 1, 3, 0, tzinfo=timezone.utc)
MINUTE = timedelta(minutes=1)
MODELS = {
    "events": WebhookEvent,
    "rejected deliveries": RejectedDelivery,
    "rejection tallies": RejectionTally,
    "audit": AuditEntry,
    "access log": AccessEntry,
    "gone flows": FlowRecord,
}
WINDOWS = {  # the defaults, in days
    "events": 90,
    "rejected deliveries": 30,
    "rejection tallies": 30,
    "audit": 3650,
    "access log": 3650,
    "gone flows": 90,
}


def add_rows(name: str, moments: list[datetime], tag: str = "") -> None:
    """Rows of kind `name` whose retention time (received, refused, recorded, gone) is each of `moments`."""
    rows = []
    for number, at in enumerate(moments):
        key = f"{tag}{name[:4]}-{number}"
        rows.append(
            {
                "events": {
                    "event_id": key,
                    "received_at": at,
                    "body": "{}",
                    "body_sha256": hashlib.sha256(key.encode()).hexdigest(),
                    "headers": "{}",
                    "scheme": "hmac-sha256",
                    "secret_index": 0,
                },
                "rejected deliveries": {"at": at, "reason": "bad signature"},
                "rejection tallies": {
                    "kind": "signature",
                    "source_ip": key,
                    "count": 1,
                    "first_at": at,
                    "last_at": at,
                    "last_reason": "",
                },
                "audit": {"at": at, "username": "kari", "action": "view_flow", "target": key},
                "access log": {
                    "at": at,
                    "subject_key": "a" * 64,
                    "username": "kari",
                    "kind": "flow_detail",
                    "target": key,
                },
                "gone flows": {"flow_id": key, "change_source": "sync", "changed_at": at, "seen_at": at, "gone_at": at},
            }[name]
        )
    db.session.execute(insert(MODELS[name]), rows)
    db.session.commit()


def count(name: str) -> int:
    return db.session.scalar(select(func.count()).select_from(MODELS[name]))


def settings_of(app):
    return app.extensions["portal.settings"]


def removed_counts(result) -> dict[str, int]:
    return {name: removed.count for name, removed in result.items()}


def test_each_kind_goes_just_outside_its_window_and_stays_just_inside(make_app, database_url):
    app = make_app(database=database_url)
    with app.app_context():
        for name, days in WINDOWS.items():
            edge = NOW - timedelta(days=days)
            add_rows(name, [edge - MINUTE, edge + MINUTE])
        long_ago = NOW.replace(year=1990)  # a flow still listed is never removed for age
        db.session.add(FlowRecord(flow_id="still-listed", change_source="sync", changed_at=long_ago, seen_at=long_ago))
        db.session.commit()

        first = apply_retention(settings_of(app), NOW)
        assert removed_counts(first) == dict.fromkeys(WINDOWS, 1)
        assert list(first) == list(WINDOWS), "reported in a fixed order"
        assert {name: count(name) for name in WINDOWS} == dict.fromkeys(WINDOWS, 1) | {"gone flows": 2}
        assert db.session.scalar(select(FlowRecord.flow_id).where(FlowRecord.flow_id == "still-listed"))

        again = apply_retention(settings_of(app), NOW)
        assert removed_counts(again) == dict.fromkeys(WINDOWS, 0), "a second run removes nothing"


def test_replays_of_removed_events_stay_duplicates(make_app, database_url):
    app = make_app(database=database_url)
    with app.app_context():
        add_rows("events", [NOW - timedelta(days=91), NOW - timedelta(days=1)])
        assert removed_counts(apply_retention(settings_of(app), NOW))["events"] == 1
        digest = hashlib.sha256(b"even-0").hexdigest()
        assert was_pruned("even-0") and was_pruned(f"sha256:{digest}"), "id and body hash are kept"
        assert not was_pruned("even-1")


def test_big_runs_go_in_batches_and_zero_keeps_forever(make_app):
    app = make_app(PORTAL_AUDIT_RETENTION_DAYS="0", PORTAL_REJECTED_RETENTION_DAYS="1")
    with app.app_context():
        add_rows("audit", [NOW.replace(year=1990)])
        add_rows("rejected deliveries", [NOW - timedelta(days=2)] * (2 * BATCH + 1))
        result = apply_retention(settings_of(app), NOW)
        assert result["rejected deliveries"].count == 2 * BATCH + 1 and count("rejected deliveries") == 0
        assert result["audit"].before is None and count("audit") == 1
        assert result["audit"].line() == "audit: kept forever (PORTAL_AUDIT_RETENTION_DAYS=0)"


def test_the_command_prints_one_line_per_kind(make_app):
    app = make_app()
    with app.app_context():
        add_rows("audit", [datetime.now(timezone.utc) - timedelta(days=3651)])
    result = app.test_cli_runner().invoke(args=["retention", "apply"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [line.split(":")[0] for line in lines] == list(WINDOWS)
    assert lines[0].startswith("events: removed 0 (received before ")
    assert lines[3].startswith("audit: removed 1 (recorded before ")


def test_a_held_lease_is_reported_and_nothing_is_removed(make_app):
    app = make_app()
    with app.app_context():
        add_rows("audit", [datetime.now(timezone.utc) - timedelta(days=3651)])
        assert DatabaseLease(LEASE_NAME, holder="other-host:1:beef").acquire()
    for args in (["retention", "apply"], ["events", "prune", "--older-than", "1d"]):
        result = app.test_cli_runner().invoke(args=args)
        assert result.exit_code == 0, result.output
        assert "another retention run holds the lock (other-host:1:beef, until " in result.output
    with app.app_context():
        assert count("audit") == 1


def test_two_runs_at_once_on_postgresql_remove_each_row_once(make_app, postgres_database):
    apps = [make_app(database=postgres_database), make_app(database=postgres_database)]
    old = {name: NOW - timedelta(days=days) - MINUTE for name, days in WINDOWS.items()}
    with apps[0].app_context():
        add_rows("events", [old["events"]] * (BATCH + 7))
        for name in WINDOWS.keys() - {"events"}:
            add_rows(name, [old[name]] * 3 + [NOW])
    start, results = threading.Barrier(2), [None, None]

    def run(slot: int) -> None:
        with apps[slot].app_context():
            start.wait(timeout=30)
            try:
                results[slot] = removed_counts(apply_retention(settings_of(apps[slot]), NOW))
            except RetentionLocked as locked:
                results[slot] = str(locked)

    threads = [threading.Thread(target=run, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert None not in results, "both runs finished without an error"
    runs = [result for result in results if isinstance(result, dict)]
    locked = [result for result in results if isinstance(result, str)]
    assert all("another retention run holds the lock" in message for message in locked)
    totals = {name: sum(run[name] for run in runs) for name in WINDOWS}
    assert totals == {"events": BATCH + 7} | dict.fromkeys(WINDOWS.keys() - {"events"}, 3)
    with apps[1].app_context():
        assert {name: count(name) for name in WINDOWS} == {"events": 0} | dict.fromkeys(WINDOWS.keys() - {"events"}, 1)
        assert DatabaseLease(LEASE_NAME).current().holder is None, "the lease is released"


def test_overlapping_prunes_without_the_lease_remove_each_row_once(make_app, postgres_database):
    """A run whose lease expired while it stalled may overlap the next one: neither fails nor counts twice."""
    apps = [make_app(database=postgres_database), make_app(database=postgres_database)]
    with apps[0].app_context():
        add_rows("events", [NOW - timedelta(days=91)] * (3 * BATCH))
        add_rows("audit", [NOW.replace(year=1990)] * (3 * BATCH))
    start, removed, failed = threading.Barrier(2), [], []

    def run(app) -> None:
        with app.app_context():
            start.wait(timeout=30)
            try:
                removed.append((prune_events(NOW - timedelta(days=90)), prune_audit(NOW - timedelta(days=3650))))
            except Exception as error:  # noqa: BLE001 - the assertion below names it
                failed.append(repr(error))

    threads = [threading.Thread(target=run, args=(app,)) for app in apps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert failed == [] and len(removed) == 2
    assert tuple(map(sum, zip(*removed, strict=True))) == (3 * BATCH, 3 * BATCH)
    with apps[0].app_context():
        assert count("events") == count("audit") == 0
        assert was_pruned("even-0") and was_pruned(f"even-{3 * BATCH - 1}")


@pytest.mark.parametrize(
    "variable",
    [
        "PORTAL_EVENT_RETENTION_DAYS",
        "PORTAL_REJECTED_RETENTION_DAYS",
        "PORTAL_AUDIT_RETENTION_DAYS",
        "PORTAL_ACCESS_LOG_RETENTION_DAYS",
        "PORTAL_GONE_FLOW_RETENTION_DAYS",
    ],
)
@pytest.mark.parametrize("value", ["ten", "-1", "36501", "1.5"])
def test_a_malformed_retention_setting_is_a_one_line_error(variable, value):
    config = portal_config("http://127.0.0.1:8081", "sqlite://", **{variable: value})
    with pytest.raises(SettingsError) as raised:
        load_settings(config)
    assert str(raised.value).startswith(variable) and "\n" not in str(raised.value)


def test_retention_defaults():
    settings = load_settings(portal_config("http://127.0.0.1:8081", "sqlite://"))
    assert (
        settings.event_retention_days,
        settings.rejected_retention_days,
        settings.audit_retention_days,
        settings.access_log_retention_days,
        settings.gone_flow_retention_days,
    ) == (90, 30, 3650, 3650, 90)
