"""Insights benchmark (issue 12): p95 of the whole /insights page on 1,000,000 indexed flows, PostgreSQL.

Seeds a year of flows (created evenly up to now, with opened and decided times drawn like real consents,
about 2 % with an incident) and measures the signed-in page for today, 7 days, 30 days and a 365-day
custom range through Flask's test client, against the p95 of a primary-key lookup of the same store in the
same run. Prints the EXPLAIN (ANALYZE) of every query the page makes for the 365-day range.

Run: .venv/bin/python tests/benchmarks/bench_insights.py [FLOWS]
     .venv/bin/python tests/benchmarks/bench_insights.py --seed DATABASE_URL FLOWS   (a migrated database)
"""

import os
import random
import statistics
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

FLOWS = 1_000_000
REPEATS = 60
YEAR = timedelta(days=365)
USER, PASSWORD = "bench", "bench-password-0000"
FLOW_COLUMNS = (  # noqa: SIM905
    "flow_id reference_id consent_status lifecycle archived country created_at updated_at version has_incidents "
    "opened_at decided_at status_at state_at changed_at change_source seen_at listed_at stub"
).split()
INCIDENT_COLUMNS = (
    "flow_id",
    "incident_id",
    "task_type",
    "task_category",
    "message",
    "source",
    "first_seen_at",
    "last_seen_at",
    "resolved_at",
)


def _after(created: datetime, chooser: random.Random, median_minutes: float) -> datetime:
    """A time after `created`, log-normally distributed around `median_minutes` (people answer late, a few very)."""
    return created + timedelta(minutes=chooser.lognormvariate(0, 1.2) * median_minutes)


def flow_rows(count: int, now: datetime):
    """Flows created evenly over the year up to `now`: 20 % never opened, the rest mostly decided."""
    chooser = random.Random(20261201)
    step = YEAR / count
    for number in range(count):
        created = now - YEAR + step * number
        opened = decided = None
        status = "Unopened"
        if chooser.random() < 0.8:
            opened = _after(created, chooser, 180)
            status = "Opened"
            if chooser.random() < 0.8:
                decided = _after(opened, chooser, 20)
                status = "Accepted" if chooser.random() < 0.78 else "Rejected"
        if opened and opened > now:
            opened = decided = None
            status = "Unopened"
        if decided and decided > now:
            decided, status = None, "Opened"
        archived = chooser.random() < 0.1
        lifecycle = "cancelled" if archived else "completed" if decided else "active"
        changed = decided or opened or created
        yield (
            f"bench-{number:08d}", f"LA-{10001 + number}", status, lifecycle, archived, chooser.choice("nsf"),
            created, changed, 1 + (opened is not None) + (decided is not None), False,
            opened, decided, changed, changed, changed, "sync", changed, changed, False,
        )  # fmt: skip


def incident_rows(count: int, now: datetime):
    chooser = random.Random(7)
    step = YEAR / count
    for number in range(0, count, 50):  # every 50th flow: 2 %
        seen = min(now - YEAR + step * number + timedelta(minutes=chooser.randrange(1, 600)), now)
        resolved = seen + timedelta(hours=2) if chooser.random() < 0.7 else None
        yield (
            f"bench-{number:08d}", f"incident-{number}", "send-initiate-webhook", "incident",
            "The webhook could not be delivered", "sync", seen, seen, resolved,
        )  # fmt: skip


def seed(url: str, count: int, now: datetime) -> float:
    """COPY `count` flows and their incidents into a migrated PostgreSQL database; seconds taken."""
    started = time.perf_counter()
    engine = create_engine(url)
    with engine.begin() as connection:
        cursor = connection.connection.cursor()
        with cursor.copy(f"COPY flow_index ({', '.join(FLOW_COLUMNS)}) FROM STDIN") as copy:
            for row in flow_rows(count, now):
                copy.write_row(row)
        with cursor.copy(f"COPY flow_incidents ({', '.join(INCIDENT_COLUMNS)}) FROM STDIN") as copy:
            for row in incident_rows(count, now):
                copy.write_row(row)
        # COPY bypasses the index writer: mark every populated quarter as migration 0011 does on an upgrade.
        connection.execute(text(_migration_0011().mark_all("postgresql")))
    # VACUUM as autovacuum would have by now: the visibility map lets index-only scans skip the table.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE flow_index"))
        connection.execute(text("VACUUM ANALYZE flow_incidents"))
    engine.dispose()
    return time.perf_counter() - started


def _migration_0011():
    import importlib.util

    path = ROOT / "portal/migrations/versions/0011_insight_rollups.py"
    specification = importlib.util.spec_from_file_location("migration_0011", path)
    module = importlib.util.module_from_spec(specification)
    specification.loader.exec_module(module)
    return module


def p95_ms(run, repeats: int = REPEATS, prepare=lambda: None) -> tuple[float, float]:
    """p95 and median of `run()` in milliseconds, after two warm-up calls (`prepare()` before each, not timed)."""
    run(), run()
    timings = []
    for _ in range(repeats):
        prepare()
        started = time.perf_counter()
        run()
        timings.append((time.perf_counter() - started) * 1000)
    return statistics.quantiles(timings, n=20)[-1], statistics.median(timings)


def ranges(now: datetime, zone: str) -> dict[str, str]:
    from zoneinfo import ZoneInfo

    today = now.astimezone(ZoneInfo(zone)).date()
    first = today - timedelta(days=364)
    return {
        "today": "/insights?range=today",
        "7 days": "/insights?range=7d",
        "30 days": "/insights?range=30d",
        "365 days (custom)": f"/insights?range=custom&from={first.isoformat()}&to={today.isoformat()}",
    }


def measure(url: str, count: int) -> dict:
    from support import migrated, portal_config, sign_in

    from portal import create_app
    from portal.extensions import db
    from portal.models import FlowRecord, User

    app = migrated(create_app(portal_config("http://127.0.0.1:9", url, WTF_CSRF_ENABLED=False)))
    with app.app_context():
        user = User(username=USER, role="viewer")
        user.set_password(PASSWORD)
        db.session.add(user)
        db.session.commit()
    client = app.test_client()
    assert sign_in(client, USER, PASSWORD).status_code == 302
    now = datetime.now(timezone.utc)
    figures = {}
    paths = ranges(now, app.extensions["portal.settings"].timezone)
    year = paths["365 days (custom)"]
    started = time.perf_counter()  # the first view after the upgrade sums every quarter of the year once
    assert client.get(year).status_code == 200
    cold = (time.perf_counter() - started) * 1000
    figures["page, 365 days, cold first view"] = (cold, cold)
    with app.app_context():
        chooser = random.Random(3)
        figures["primary key lookup"] = p95_ms(lambda: _lookup(db, FlowRecord, chooser, count))
        figures["live figures, 365 days (before)"] = p95_ms(lambda: _live_year(app, now), repeats=10)
    for name, path in paths.items():
        page = client.get(path)
        assert page.status_code == 200 and 'data-testid="insights"' in page.text, (path, page.status_code)
        figures[f"page, {name}"] = p95_ms(lambda path=path: client.get(path))
    writes = random.Random(5)
    figures["page, 365 days, 10 flows decided before each view"] = p95_ms(
        lambda: client.get(year), prepare=lambda: _decide_recent(app, writes, count, now)
    )
    for name, (p95, median) in figures.items():
        print(f"{name:<28} p95 {p95:7.1f} ms   median {median:7.1f} ms", file=sys.stderr)
    with app.test_request_context():
        explain(app, now)
    app.extensions["flow_index"].close()
    with app.app_context():
        db.engine.dispose()
    return figures


def _live_year(app, now: datetime):
    from portal import insights
    from portal.extensions import db

    zone = app.extensions["portal.settings"].timezone
    today = insights.local_today(now, zone)
    insights.live_insight(insights.DateRange("custom", today - timedelta(days=364), today, zone))
    db.session.remove()


def _decide_recent(app, chooser: random.Random, count: int, now: datetime) -> None:
    """The index writer records 10 decisions of flows created in the last two days (their quarters get dirty)."""
    from portal.extensions import db
    from portal.flowapi.records import FlowSummary
    from portal.flowindex.observations import from_summary
    from portal.flowindex.store import apply_observations

    step = YEAR / count
    recent = count - int(timedelta(days=2) / step)
    observations = []
    for number in chooser.sample(range(recent, count), 10):
        created = now - YEAR + step * number
        item = {"id": f"bench-{number:08d}", "status": "Accepted", "createdAt": created.isoformat(),
                "updatedAt": datetime.now(timezone.utc).isoformat()}  # fmt: skip
        observations.append(from_summary(FlowSummary.from_json(item), False, datetime.now(timezone.utc)))
    with app.app_context():
        apply_observations(observations, app.extensions["portal.settings"].index_key)
        db.session.remove()


def _lookup(db, model, chooser, count):
    db.session.get(model, chooser.randrange(1, count))
    db.session.expunge_all()


def explain(app, now: datetime) -> None:
    """EXPLAIN ANALYZE of each query the page makes for the 365-day range."""
    from portal import insights
    from portal.extensions import db

    zone = app.extensions["portal.settings"].timezone
    today = insights.local_today(now, zone)
    span = insights.DateRange("custom", today - timedelta(days=364), today, zone)
    for name, query in insights.queries_for_explain(span).items():
        compiled = query.compile(db.engine, compile_kwargs={"render_postcompile": True})
        explained = db.session.connection().exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {compiled}", compiled.params)
        plan = [line for line in explained.scalars() if "Group Key" not in line]  # the key lists 365 day bounds
        print(f"  EXPLAIN ANALYZE {name}:\n    " + "\n    ".join(plan), file=sys.stderr)


def main(count: int) -> dict:
    from support import create_database_beside, drop_database, migrated, portal_config

    from portal import create_app

    postgres = os.environ.get("PORTAL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    url = create_database_beside(postgres, f"portal_bench_{uuid.uuid4().hex[:10]}")
    try:
        migrated(create_app(portal_config("http://127.0.0.1:9", url)))
        seconds = seed(url, count, datetime.now(timezone.utc))
        print(f"postgres: seeded {count} flows over a year in {seconds:.0f} s", file=sys.stderr)
        return measure(url, count)
    finally:
        drop_database(postgres, make_url(url).database)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--seed"]:
        print(f"seeded in {seed(sys.argv[2], int(sys.argv[3]), datetime.now(timezone.utc)):.0f} s")
    else:
        print(main(int(sys.argv[1]) if len(sys.argv) > 1 else FLOWS))
