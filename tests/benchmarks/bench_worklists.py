"""Work-list benchmark (issue 12): p95 of /insights/stuck and /insights/incidents on N indexed flows, PostgreSQL.

Seeds flows and incidents as the insights benchmark does (a year of flows, about 2 % with an incident, 30 %
of those still open), fills `last_change_at` with migration 0010's backfill (timed), and measures the signed-in
pages through Flask's test client against the p95 of a primary-key lookup of the same store in the same run (the
machine is shared: that says how loaded it was). For a before/after on the same load it also times the stuck
list's query as it was before 0010 (last change computed per row and sorted), and prints the new queries' plans.

Run: .venv/bin/python tests/benchmarks/bench_worklists.py [FLOWS]
"""

import importlib.util
import os
import random
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import create_engine, make_url, text

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "benchmarks"))

from bench_insights import PASSWORD, USER, _lookup, p95_ms, seed  # noqa: E402

MIGRATION = ROOT / "portal" / "migrations" / "versions" / "0010_last_change.py"
# The stuck list's query before migration 0010: the last change computed per row, then sorted.
LAST_CHANGE = (
    "CASE WHEN updated_at IS NOT NULL AND (opened_at IS NULL OR updated_at >= opened_at) THEN updated_at"
    " ELSE COALESCE(opened_at, created_at, changed_at) END"
)
NOT_DONE_BEFORE = (
    "(consent_status IN ('Unopened', 'Opened') OR consent_status IS NULL)"
    " AND (lifecycle NOT IN ('completed', 'cancelled') OR lifecycle IS NULL)"
    " AND (archived IS false OR archived IS NULL) AND gone_at IS NULL AND unknown_at IS NULL AND stub IS false"
)
BEFORE = {
    "stuck list query before 0010 (SQL)": f"SELECT * FROM flow_index WHERE {NOT_DONE_BEFORE}"
    f" AND {LAST_CHANGE} < :limit ORDER BY {LAST_CHANGE}, id LIMIT 101",
    "stuck count query before 0010 (SQL)": "SELECT count(*) FROM (SELECT id FROM flow_index"
    f" WHERE {NOT_DONE_BEFORE} AND {LAST_CHANGE} < :limit LIMIT 10001) AS stuck",
}

PAGES = {
    "stuck flows": "/insights/stuck",
    "stuck flows, 2nd section paged": "/insights/stuck?hours=1",
    "incident queue": "/insights/incidents",
    "one incident group": "/insights/incidents?type=send-initiate-webhook&category=incident",
}


def measure(url: str) -> dict:
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
    figures = {}
    with app.app_context():
        chooser, count = random.Random(5), db.session.scalar(text("SELECT max(id) FROM flow_index"))
        figures["primary key lookup"] = p95_ms(lambda: _lookup(db, FlowRecord, chooser, count), repeats=30)
        limit = {"limit": datetime.now(timezone.utc) - timedelta(hours=48)}
        for name, sql in BEFORE.items():
            figures[name] = p95_ms(lambda sql=sql: db.session.execute(text(sql), limit).all(), repeats=10)
        explain_stuck(db)
    for name, figure in figures.items():
        print(f"{name:<40} p95 {figure[0]:7.1f} ms   median {figure[1]:7.1f} ms", file=sys.stderr)
    for name, path in PAGES.items():
        page = client.get(path)
        assert page.status_code == 200, (path, page.status_code)
        figures[name] = p95_ms(lambda path=path: client.get(path), repeats=30)
        print(f"{name:<40} p95 {figures[name][0]:7.1f} ms   median {figures[name][1]:7.1f} ms", file=sys.stderr)
    app.extensions["flow_index"].close()
    with app.app_context():
        db.engine.dispose()
    return figures


def explain_stuck(db) -> None:
    """EXPLAIN ANALYZE of the stuck list and count as the page runs them."""
    from sqlalchemy import event

    from portal.worklists import count_stuck, stuck_page

    statements = []

    def keep(connection, cursor, statement, parameters, context, executemany):
        statements.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", keep)
    try:
        now = datetime.now(timezone.utc)
        stuck_page(now, timedelta(hours=48)), count_stuck(now, timedelta(hours=48))
    finally:
        event.remove(db.engine, "before_cursor_execute", keep)
    for statement, parameters in statements:
        if "last_change_at <" in statement:
            plan = db.session.connection().exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters)
            print("\n".join(row[0] for row in plan), file=sys.stderr)
    db.session.rollback()


def backfill(url: str) -> float:
    """Migration 0010's backfill and index over the seeded flows (the seeder writes no last_change_at); seconds."""
    spec = importlib.util.spec_from_file_location("migration_0010", MIGRATION)
    migration = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(migration)
    engine = create_engine(url)
    started = time.perf_counter()
    with engine.begin() as connection:  # as the migration does it: the column filled, then its index built
        connection.execute(text("DROP INDEX ix_flow_index_not_done_change"))
        connection.execute(text(migration.BACKFILL))
        connection.execute(
            text(
                "CREATE INDEX ix_flow_index_not_done_change ON flow_index (last_change_at, id)"
                f" WHERE {migration.POSTGRESQL_NOT_DONE}"
            )
        )
    seconds = time.perf_counter() - started
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("VACUUM ANALYZE flow_index"))
    engine.dispose()
    return seconds


def main(count: int) -> dict:
    from support import create_database_beside, drop_database, migrated, portal_config

    from portal import create_app

    postgres = os.environ.get("PORTAL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    url = create_database_beside(postgres, f"portal_bench_{uuid.uuid4().hex[:10]}")
    try:
        migrated(create_app(portal_config("http://127.0.0.1:9", url)))
        seconds = seed(url, count, datetime.now(timezone.utc))
        print(f"postgres: seeded {count} flows in {seconds:.0f} s", file=sys.stderr)
        seconds = backfill(url)
        print(f"postgres: migration 0010's backfill and index on {count} flows took {seconds:.1f} s", file=sys.stderr)
        return measure(url)
    finally:
        drop_database(postgres, make_url(url).database)


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000))
