"""Webhook benchmark: verified events per second taken by the portal under gunicorn (2 workers) on
SQLite and on PostgreSQL, against a bare endpoint answering 204 under the same settings, in one run.

Run: .venv/bin/python tests/benchmarks/bench_webhooks.py  (PostgreSQL: PORTAL_TEST_POSTGRES_URL or the
local server on 127.0.0.1:5432, database test)
"""

import json
import os
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

import requests
from standardwebhooks import Webhook

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.servers import BIN, ROOT, SECRET, gunicorn, portal_env  # noqa: E402
from support import empty_postgres  # noqa: E402

EVENTS = 3000
SENDERS = 8
POSTGRES = os.environ.get("PORTAL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def signed_deliveries(count: int) -> list[tuple[bytes, dict]]:
    signer, now = Webhook(SECRET), datetime.now(timezone.utc)
    deliveries = []
    for _ in range(count):
        event_id = str(uuid.uuid4())
        body = json.dumps(
            {
                "id": event_id,
                "type": "flow.status_changed",
                "timestamp": now.isoformat(),
                "data": {"flowId": str(uuid.uuid4()), "referenceId": "LA-1", "status": "Opened"},
            }
        )
        deliveries.append(
            (
                body.encode(),
                {
                    "webhook-id": event_id,
                    "webhook-timestamp": str(int(now.timestamp())),
                    "webhook-signature": signer.sign(event_id, now, body),
                    "content-type": "application/json",
                },
            )
        )
    return deliveries


def blast(url: str, deliveries) -> float:
    """Send every delivery from SENDERS threads; events per second."""
    failures = []

    def send(batch):
        session = requests.Session()
        for body, headers in batch:
            status = session.post(url, data=body, headers=headers, timeout=30).status_code
            if status >= 300:
                failures.append(status)

    threads = [threading.Thread(target=send, args=(deliveries[index::SENDERS],)) for index in range(SENDERS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} deliveries failed, e.g. {failures[:3]}")
    return len(deliveries) / elapsed


def migrate(env: dict) -> None:
    import subprocess

    subprocess.run(
        [str(BIN / "flask"), "--app", "portal", "db", "upgrade"],
        cwd=ROOT,
        env={**os.environ, **env},
        check=True,
        capture_output=True,
    )


def fresh_postgres() -> str | None:
    try:
        return empty_postgres(POSTGRES)
    except Exception as error:  # reported, the run goes on without PostgreSQL
        print(f"PostgreSQL unavailable: {error}", file=sys.stderr)
        return None


def measure(name: str, app: str, env: dict, ready: str) -> float:
    with gunicorn(app, env, ready) as url:
        blast(url + "/webhooks/flow", signed_deliveries(200))  # warm-up
        rate = blast(url + "/webhooks/flow", signed_deliveries(EVENTS))
    print(f"{name:<28} {rate:8.0f} events/s", file=sys.stderr)
    return rate


def main() -> dict:
    results = {}
    bare_env = {"PYTHONPATH": str(ROOT / "tests" / "benchmarks")}
    results["bare_204"] = measure("bare endpoint (204)", "bare_app:app", bare_env, "/healthz")
    with tempfile.TemporaryDirectory() as folder:
        sqlite_env = portal_env("http://127.0.0.1:9", f"sqlite:///{folder}/bench.db")
        migrate(sqlite_env)
        results["portal_sqlite"] = measure("portal, SQLite", "wsgi:app", sqlite_env, "/healthz")
    postgres = fresh_postgres()
    if postgres:
        postgres_env = portal_env("http://127.0.0.1:9", postgres)
        migrate(postgres_env)
        results["portal_postgres"] = measure("portal, PostgreSQL", "wsgi:app", postgres_env, "/healthz")
    for key in ("portal_sqlite", "portal_postgres"):
        if key in results:
            results[f"{key}_ratio_to_bare"] = results[key] / results["bare_204"]
    return results


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
