"""Subject requests: how long finding a person's webhook events takes, against reading every event in the same run.

An access or an erasure request finds the events whose body names the person, whichever flow they are of: it
reads every stored body. Seeded: EVENTS events as the Flow Service sends them (ids, a time, a reference and a
status; no national id), one in 10,000 naming the person somewhere in its text. Timed, each the median of three:

- the floor: every event's id and body read with the driver, in batches by id (what any scan of the bodies costs);
- the whole read: every event loaded as an ORM object and each body read for ids as masking reads them (what
  `find_subject` did up to 2026-11-28);
- `find_subject` itself (flows, events, audit, access log), which reads a body for ids only when its digits hold
  the person's.

Figures are seconds per million events. Run: .venv/bin/python tests/benchmarks/bench_subjects.py [EVENTS]
(SQLite in a temporary folder, and PostgreSQL as for the tests).
"""

import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sqlalchemy import insert, select
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

EVENTS = 200_000
PERSON = "15108695088"
NAMING_EVERY = 10_000
BATCH = 2_000


def event_rows(count: int) -> list[dict]:
    started = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows = []
    for number in range(count):
        event_id, flow_id = str(uuid.uuid4()), str(uuid.uuid4())
        at = started + timedelta(seconds=number)
        data = {"flowId": flow_id, "referenceId": f"LA-{10000 + number % 90000}", "status": "Opened"}
        if number % NAMING_EVERY == NAMING_EVERY // 2:
            data["note"] = f"customer {PERSON[:6]} {PERSON[6:]} called"
        body = {"id": event_id, "type": "flow.status_changed", "timestamp": at.isoformat(), "data": data}
        rows.append(
            {
                "event_id": event_id,
                "event_type": "flow.status_changed",
                "flow_id": flow_id,
                "status": "Opened",
                "occurred_at": at,
                "received_at": at,
                "body": json.dumps(body),
                "headers": "{}",
                "scheme": "v1",
                "secret_index": 0,
            }
        )
    return rows


def seed(count: int) -> None:
    from portal.extensions import db
    from portal.models import WebhookEvent

    for start in range(0, count, 10_000):
        db.session.execute(insert(WebhookEvent), event_rows(min(10_000, count - start)))
        db.session.commit()


def read_every_body() -> int:
    from portal.extensions import db
    from portal.models import WebhookEvent

    connection, last_id, read = db.session.connection(), 0, 0
    while True:
        query = select(WebhookEvent.id, WebhookEvent.body).where(WebhookEvent.id > last_id).order_by(WebhookEvent.id)
        batch = connection.execute(query.limit(BATCH)).all()
        read += len(batch)
        if len(batch) < BATCH:
            return read
        last_id = batch[-1].id


def whole_read() -> int:
    from portal.access_log import subject_key_of, subject_keys_of_event
    from portal.extensions import db
    from portal.models import WebhookEvent

    key, last_id, found = subject_key_of(PERSON), 0, 0
    while True:
        query = select(WebhookEvent).where(WebhookEvent.id > last_id).order_by(WebhookEvent.id).limit(500)
        batch = list(db.session.scalars(query))
        found += sum(key in subject_keys_of_event(None, event.body) for event in batch)
        if len(batch) < 500:
            return found
        last_id = batch[-1].id


def find_events() -> int:
    from portal.subjects import find_subject

    found = find_subject(PERSON)
    assert found is not None
    return len(found.events)


def timed(work, rounds: int = 3) -> tuple[float, int]:
    from portal.extensions import db

    seconds, result = [], None
    for _ in range(rounds):
        db.session.expunge_all()
        started = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - started)
        db.session.rollback()
    return statistics.median(seconds), result


def measure(url: str, count: int) -> dict:
    from support import migrated, portal_config

    from portal import create_app

    app = migrated(create_app(portal_config("http://127.0.0.1:9", url)))
    with app.app_context():
        seed(count)
        per_million = 1_000_000 / count
        floor, read = timed(read_every_body)
        whole, named = timed(whole_read)
        scan, found = timed(find_events)
    assert read == count and found == named == count // NAMING_EVERY, (read, named, found)
    return {
        "floor s/M": round(floor * per_million, 1),
        "whole read s/M": round(whole * per_million, 1),
        "find_subject s/M": round(scan * per_million, 1),
        "whole read / floor": round(whole / floor, 1),
        "find_subject / floor": round(scan / floor, 1),
    }


def main(count: int) -> None:
    from support import create_database_beside, drop_database

    with tempfile.TemporaryDirectory() as folder:
        print("sqlite", measure(f"sqlite:///{folder}/subjects.db", count), flush=True)
    postgres = os.environ.get("PORTAL_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
    url = create_database_beside(postgres, f"portal_bench_{uuid.uuid4().hex[:10]}")
    try:
        print("postgres", measure(url, count), flush=True)
    finally:
        drop_database(postgres, make_url(url).database)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else EVENTS)
