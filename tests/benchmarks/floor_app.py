"""A reference for the webhook figures: the least a verified, durable ingest can do in Python under gunicorn.

Plain WSGI (no Flask), the Standard Webhooks signature checked, the JSON read, the event inserted into a table of
five columns with one unique index by the driver itself (no SQLAlchemy), and group commit: the first waiting
request thread of a process commits every row waiting then, in one transaction, and wakes the others, which
answer 200 only after it. SQLite in WAL mode with `synchronous=FULL` (the writers of both workers take turns on
a flock, as the portal's do) or PostgreSQL with its default durable commit. No flow index, no metrics, no log
lines, no retention check: what the portal does beyond a durable insert is left out, so the portal's figure
over this one says how close it comes to what the design allows.

Run by webhook_floor.py with FLOOR_DATABASE (a SQLite path or a postgresql:// URL).
"""

import fcntl
import json
import os
import sqlite3
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.servers import SECRET  # noqa: E402
from standardwebhooks import Webhook  # noqa: E402

DATABASE = os.environ["FLOOR_DATABASE"]
COLUMNS = "event_id, flow_id, status, body, headers"
TABLE = (
    "CREATE TABLE IF NOT EXISTS floor_events"
    " (id {key}, event_id TEXT UNIQUE, flow_id TEXT, status TEXT, body TEXT, headers TEXT)"
)
signatures = Webhook(SECRET)


class SqliteStore:
    def __init__(self, path: str) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=30)
        self.connection.execute("PRAGMA journal_mode=WAL")
        self.connection.execute("PRAGMA synchronous=FULL")
        self.connection.execute(TABLE.format(key="INTEGER PRIMARY KEY"))
        self.lock_file = open(path + ".lock", "a+b")  # noqa: SIM115 - lives as long as the process

    def insert(self, rows: list[tuple[str, ...]]) -> None:
        fcntl.flock(self.lock_file, fcntl.LOCK_EX)
        try:
            self.connection.execute("BEGIN IMMEDIATE")
            self.connection.executemany(f"INSERT OR IGNORE INTO floor_events ({COLUMNS}) VALUES (?, ?, ?, ?, ?)", rows)
            self.connection.execute("COMMIT")
        finally:
            fcntl.flock(self.lock_file, fcntl.LOCK_UN)


class PostgresStore:
    def __init__(self, url: str) -> None:
        import psycopg

        self.connection = psycopg.connect(url.replace("+psycopg", ""))
        with self.connection.transaction():
            self.connection.execute(TABLE.format(key="BIGSERIAL PRIMARY KEY"))

    def insert(self, rows: list[tuple[str, ...]]) -> None:
        with self.connection.transaction(), self.connection.cursor() as cursor:
            cursor.executemany(
                f"INSERT INTO floor_events ({COLUMNS}) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", rows
            )


class GroupCommit:
    """Leader and followers: no committer thread, so no hand-off to one and back."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.waiting: list[list[Any]] = []  # [row, committed]
        self.committing = False
        self.store: SqliteStore | PostgresStore | None = None
        self.pid = 0

    def commit(self, row: tuple[str, ...]) -> None:
        mine = [row, False]
        with self.changed:
            self.waiting.append(mine)
            while self.committing and not mine[1]:
                self.changed.wait()
            if mine[1]:
                return
            self.committing = True
            batch, self.waiting = self.waiting, []
        try:
            self.open_store().insert([pending[0] for pending in batch])
        finally:
            with self.changed:
                for pending in batch:
                    pending[1] = True
                self.committing = False
                self.changed.notify_all()

    def open_store(self) -> SqliteStore | PostgresStore:
        if self.pid != os.getpid():  # opened in the worker, after gunicorn's fork
            self.store = PostgresStore(DATABASE) if DATABASE.startswith("postgresql") else SqliteStore(DATABASE)
            self.pid = os.getpid()
        assert self.store is not None
        return self.store


group_commit = GroupCommit()


def app(environ: dict, start_response: Any) -> list[bytes]:
    if environ["PATH_INFO"] == "/healthz":
        group_commit.open_store()
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]
    body = environ["wsgi.input"].read(int(environ["CONTENT_LENGTH"]))
    headers = {
        name: environ["HTTP_" + name.upper().replace("-", "_")]
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
    }
    event = signatures.verify(body, headers)
    data = event.get("data") or {}
    group_commit.commit((event["id"], data.get("flowId"), data.get("status"), body.decode(), json.dumps(headers)))
    answer = json.dumps({"status": "stored", "id": event["id"]}).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))])
    return [answer]
