"""Work-list benchmark (issue 12): p95 of /insights/stuck and /insights/incidents on N indexed flows, PostgreSQL.

Seeds flows and incidents as the insights benchmark does (a year of flows, about 2 % with an incident, 30 %
of those still open) and measures the signed-in pages through Flask's test client.

Run: .venv/bin/python tests/benchmarks/bench_worklists.py [FLOWS]
"""

import os
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

from sqlalchemy import make_url

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "benchmarks"))

from bench_insights import PASSWORD, USER, p95_ms, seed  # noqa: E402

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
    from portal.models import User

    app = migrated(create_app(portal_config("http://127.0.0.1:9", url, WTF_CSRF_ENABLED=False)))
    with app.app_context():
        user = User(username=USER, role="viewer")
        user.set_password(PASSWORD)
        db.session.add(user)
        db.session.commit()
    client = app.test_client()
    assert sign_in(client, USER, PASSWORD).status_code == 302
    figures = {}
    for name, path in PAGES.items():
        page = client.get(path)
        assert page.status_code == 200, (path, page.status_code)
        figures[name] = p95_ms(lambda path=path: client.get(path), repeats=30)
        print(f"{name:<34} p95 {figures[name][0]:7.1f} ms   median {figures[name][1]:7.1f} ms", file=sys.stderr)
    app.extensions["flow_index"].close()
    with app.app_context():
        db.engine.dispose()
    return figures


def main(count: int) -> dict:
    from support import create_database_beside, drop_database, migrated, portal_config

    from portal import create_app

    postgres = os.environ.get("PORTAL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    url = create_database_beside(postgres, f"portal_bench_{uuid.uuid4().hex[:10]}")
    try:
        migrated(create_app(portal_config("http://127.0.0.1:9", url)))
        seconds = seed(url, count, datetime.now(timezone.utc))
        print(f"postgres: seeded {count} flows in {seconds:.0f} s", file=sys.stderr)
        return measure(url)
    finally:
        drop_database(postgres, make_url(url).database)


if __name__ == "__main__":
    print(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000))
