"""Group commit: deliveries that arrive together share one transaction, and none is answered before its commit."""

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
import warnings
from datetime import datetime, timezone
from pathlib import Path

import psycopg
import requests
from sqlalchemy import create_engine, func, select
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError
from support import DEMO_WEBHOOK_SECRET, portal_config, run_in_threads, signals_aimed_at, wait_until

from portal.database import writer_lock
from portal.extensions import db
from portal.models import WebhookEvent, utc_now
from portal.webhooks import group_commit
from portal.webhooks.group_commit import MOST_IN_A_BATCH, GroupCommitter
from portal.webhooks.signing import standard_headers

ROOT = Path(__file__).resolve().parents[1]


def delivery(event_id: str) -> tuple[bytes, dict]:
    now = datetime.now(timezone.utc)
    body = json.dumps({"id": event_id, "type": "flow.status_changed", "timestamp": now.isoformat(), "data": {}})
    headers = standard_headers(DEMO_WEBHOOK_SECRET, event_id, now, body) | {"content-type": "application/json"}
    return body.encode(), headers


def deliver_all(url: str, event_ids: list[str]) -> list:
    """Post each delivery from its own thread, all at once; the answers (or the error) in order."""
    answers: list = [None] * len(event_ids)
    start = threading.Barrier(len(event_ids))

    def send(index: int) -> None:
        body, headers = delivery(event_ids[index])
        start.wait()
        try:
            answers[index] = requests.post(f"{url}/webhooks/flow", data=body, headers=headers, timeout=30)
        except requests.RequestException as error:
            answers[index] = error

    threads = [threading.Thread(target=send, args=(index,)) for index in range(len(event_ids))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def stored_ids(app) -> set[str]:
    with app.app_context():
        return set(db.session.scalars(select(WebhookEvent.event_id)))


def poll(condition, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_deliveries_arriving_together_are_each_stored_once(make_app, database_url, serve):
    app = make_app(database=database_url)
    url = serve(app)
    unique = [str(uuid.uuid4()) for _ in range(20)]
    answers = deliver_all(url, unique + unique)  # every event twice, all at once
    assert [answer.status_code for answer in answers] == [200] * 40
    outcomes = {}
    for answer in answers:
        outcomes.setdefault(answer.json()["id"], []).append(answer.json()["status"])
    assert all(sorted(found) == ["duplicate", "stored"] for found in outcomes.values()), outcomes
    assert stored_ids(app) == set(unique)


def lock_events_table(postgres_url: str) -> psycopg.Connection:
    """A transaction that holds webhook_events: every insert waits until it ends."""
    url = make_url(postgres_url).set(drivername="postgresql")
    holder = psycopg.connect(url.render_as_string(hide_password=False))
    holder.execute("LOCK TABLE webhook_events IN EXCLUSIVE MODE")
    return holder


WAITING_INSERTS = (
    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO webhook_events%'"
)


def inserts_waiting(holder: psycopg.Connection) -> int:
    holder.execute("SELECT pg_stat_clear_snapshot()")  # else the holder's transaction sees one snapshot throughout
    return holder.execute(WAITING_INSERTS).fetchone()[0]


def test_a_batch_waits_for_its_commit_and_is_answered_after_it(make_app, postgres_database, serve):
    app = make_app(database=postgres_database, PORTAL_DB_STATEMENT_TIMEOUT="30")
    url = serve(app)
    holder = lock_events_table(postgres_database)
    first, rest = str(uuid.uuid4()), [str(uuid.uuid4()) for _ in range(12)]
    answers: dict = {}
    waiting = threading.Thread(target=lambda: answers.update(first=deliver_all(url, [first])))
    waiting.start()
    poll(lambda: inserts_waiting(holder) == 1, "the first delivery's insert to wait on the lock")
    later = threading.Thread(target=lambda: answers.update(rest=deliver_all(url, rest)))
    later.start()
    committer = app.extensions["webhook_committer"]
    poll(lambda: committer.queued() == len(rest), "the other deliveries to queue behind the first batch")
    assert answers == {} and stored_ids(app) == set(), "nothing is answered while its commit cannot happen"
    holder.rollback()
    holder.close()
    waiting.join()
    later.join()
    assert [answer.status_code for answer in answers["first"] + answers["rest"]] == [200] * 13
    assert stored_ids(app) == {first, *rest}
    assert committer.largest_batch == len(rest), "the deliveries that queued went in one transaction"


def test_a_batch_holds_at_most_its_limit_of_deliveries(make_app, serve):
    app = make_app()
    url = serve(app)
    with app.app_context():
        engine = db.engine
    event_ids = [str(uuid.uuid4()) for _ in range(150)]
    answers: list = []
    with writer_lock(engine):  # another writer has the file: the first batch waits for it and the rest queue
        sending = threading.Thread(target=lambda: answers.extend(deliver_all(url, event_ids)))
        sending.start()
        committer = wait_until(lambda: app.extensions.get("webhook_committer"), "the first delivery to arrive")
        wait_until(lambda: committer.queued() > MOST_IN_A_BATCH, "more deliveries to queue than one batch holds")
    sending.join()
    assert [answer.status_code for answer in answers] == [200] * 150
    assert stored_ids(app) == set(event_ids)
    assert committer.largest_batch == MOST_IN_A_BATCH


def event_row(event_id: str, body: str | None) -> dict:
    """A row as the receiver hands it to the committer (`body` None: a row the database refuses)."""
    return {"event_id": event_id, "body": body, "headers": "{}", "scheme": "standard-webhooks", "secret_index": 0}


def test_one_refused_row_in_a_batch_does_not_fail_the_others(make_app, caplog):
    app = make_app()
    with app.app_context():
        engine = db.engine
    committer = GroupCommitter(engine)
    outcomes: dict = {}

    def store(event_id: str, body: str | None) -> None:
        try:
            outcomes[event_id] = committer.store(event_row(event_id, body) | {"received_at": utc_now()}, frozenset())
        except IntegrityError as error:
            outcomes[event_id] = error

    with writer_lock(engine):  # the first batch waits for the file; the next two queue and go in one batch
        first = threading.Thread(target=store, args=("first", "{}"))
        first.start()
        wait_until(lambda: committer.largest_batch == 1, "the first batch to be taken")
        others = [threading.Thread(target=store, args=args) for args in (("refused", None), ("good", "{}"))]
        for thread in others:
            thread.start()
        wait_until(lambda: committer.queued() == 2, "the next two to queue")
    for thread in [first, *others]:
        thread.join()
    assert outcomes["first"] is True and outcomes["good"] is True and isinstance(outcomes["refused"], IntegrityError)
    assert stored_ids(app) == {"first", "good"}
    warning = f"webhook group commit of 2 failed ({IntegrityError!r}); committing each alone"
    assert [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING] == [warning]


def test_a_committer_whose_waits_signals_interrupt_still_answers_every_delivery(make_app, monkeypatch):
    """A signal cutting short the committer's wait for more deliveries must not make it wait for ever: the
    deliveries of its open batch would wait until the stopping worker is killed."""
    monkeypatch.setattr(group_commit, "LONGEST_WAIT_SECONDS", 10)
    app = make_app()
    with app.app_context():
        committer = GroupCommitter(db.engine)
    numbers = iter(range(1000))

    def store_next() -> bool:
        row = event_row(f"interrupted-{next(numbers)}", "{}") | {"received_at": utc_now()}
        return committer.store(row, frozenset())

    assert run_in_threads(store_next, 2) == []  # two senders known: a batch of one waits a moment for the other
    with signals_aimed_at(committer._thread):
        stored = [store_next() for _ in range(300)]
    assert all(stored) and len(stored_ids(app)) == 302


def test_a_process_forked_after_deliveries_starts_a_committer_of_its_own(make_app):
    """A thread does not survive a fork (a server preloading the app): the child's first delivery starts one."""
    app = make_app()
    body, headers = delivery("before-the-fork")
    assert app.test_client().post("/webhooks/flow", data=body, headers=headers).json["status"] == "stored"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: forking a process that has threads
        child = os.fork()
    if child == 0:  # the child: answer by its exit status only, never through pytest
        try:
            with app.app_context():
                db.engine.dispose(close=False)  # the parent's connections stay the parent's
            body, headers = delivery("after-the-fork")
            answer = app.test_client().post("/webhooks/flow", data=body, headers=headers)
            os._exit(0 if answer.status_code == 200 and answer.json["status"] == "stored" else 1)
        finally:
            os._exit(2)

    def ended():
        pid, status = os.waitpid(child, os.WNOHANG)
        return pid == child and (status,)  # a tuple: true for an exit status of 0 too

    try:
        [status] = wait_until(ended, "the forked process's delivery (it waits a minute for a committer)", 15)
    except AssertionError:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        raise
    assert os.waitstatus_to_exitcode(status) == 0, "the child's delivery was not stored"
    assert stored_ids(app) == {"before-the-fork", "after-the-fork"}


PROCESS_THAT_STORES_AND_ENDS = """
import json, sys
sys.path.insert(0, "tests")
from support import migrated
from test_group_commit import delivery
from portal import create_app
app = migrated(create_app(json.loads(sys.argv[1])))
body, headers = delivery("then-the-process-ends")
assert app.test_client().post("/webhooks/flow", data=body, headers=headers).json["status"] == "stored"
"""


def test_a_process_that_stored_a_delivery_can_end(make_app, sqlite_url):
    """The committer thread must not keep the interpreter alive: a worker told to stop, stops."""
    config = json.dumps(portal_config("http://127.0.0.1:9", sqlite_url))
    ending = subprocess.Popen([sys.executable, "-c", PROCESS_THAT_STORES_AND_ENDS, config], cwd=ROOT)
    try:
        poll(lambda: ending.poll() is not None, "the process to end after its delivery", 60)
    finally:
        ending.kill()
        ending.wait()
    assert ending.returncode == 0
    app = make_app(database=sqlite_url)
    assert stored_ids(app) == {"then-the-process-ends"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_portal(env: dict, port: int) -> subprocess.Popen:
    command = [
        str(Path(sys.executable).parent / "gunicorn"),
        "--workers",
        "1",
        "--threads",
        "8",
        "--bind",
        f"127.0.0.1:{port}",
        "--no-control-socket",
        "wsgi:app",
    ]
    portal = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    poll(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), "gunicorn to start", 60)
    return portal


def _answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=1).status_code == 200
    except requests.RequestException:
        return False


def test_a_process_killed_mid_batch_answered_none_of_it_and_a_redelivery_stores_it(
    make_app, postgres_database, sandbox
):
    app = make_app(database=postgres_database)  # migrated
    env = {name: str(value) for name, value in portal_config(sandbox.url, postgres_database).items()}
    env.pop("TESTING")
    env.update(PORTAL_DB_STATEMENT_TIMEOUT="30", FLOW_ENVIRONMENT="test")
    port = free_port()
    portal = start_portal(env, port)
    holder = lock_events_table(postgres_database)
    event_ids = [str(uuid.uuid4()) for _ in range(6)]
    answers: list = []
    sender = threading.Thread(target=lambda: answers.extend(deliver_all(f"http://127.0.0.1:{port}", event_ids)))
    sender.start()
    try:
        poll(lambda: inserts_waiting(holder) == 1, "a batch to be inserting")
        for child in subprocess.run(["pgrep", "-P", str(portal.pid)], capture_output=True, text=True).stdout.split():
            os.kill(int(child), signal.SIGKILL)  # the worker, mid-batch
        portal.send_signal(signal.SIGKILL)
        sender.join()
    finally:
        holder.rollback()
        holder.close()
        portal.kill()
        portal.wait()
    assert not [answer for answer in answers if not isinstance(answer, Exception) and answer.status_code < 300]
    assert stored_ids(app) == set(), "the killed batch was never committed"
    portal = start_portal(env, port)
    try:
        again = deliver_all(f"http://127.0.0.1:{port}", event_ids)  # the sender delivers them again
    finally:
        portal.terminate()
        portal.wait()
    assert [answer.status_code for answer in again] == [200] * len(event_ids)
    assert stored_ids(app) == set(event_ids)
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(WebhookEvent)) == len(event_ids)


HOLD_THE_WRITER_LOCK = """
import sys
from sqlalchemy import create_engine
from portal.database import writer_lock
with writer_lock(create_engine(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.readline()
"""


def flock_free(path: Path) -> bool:
    with path.open("a+b") as lock_file:
        try:
            fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        fcntl.flock(lock_file, fcntl.LOCK_UN)
        return True


def test_sqlite_background_writers_of_two_processes_take_turns(tmp_path):
    """The group committer and the index writer wait for each other in the kernel, not in SQLite's busy handler."""
    database = tmp_path / "store.db"
    command = [sys.executable, "-c", HOLD_THE_WRITER_LOCK, f"sqlite:///{database}"]
    with subprocess.Popen(command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as holder:
        assert holder.stdout.readline().strip() == "held"
        lock_path = Path(f"{database.resolve()}-writer.lock")
        assert not flock_free(lock_path), "another process's writer holds it"
        holder.stdin.write("\n")
        holder.stdin.flush()
        poll(lambda: flock_free(lock_path), "the lock to be released")
    assert holder.returncode == 0


def test_no_writer_lock_on_postgresql_or_in_memory():
    for url in ("postgresql+psycopg://u@127.0.0.1/x", "sqlite://"):
        assert isinstance(writer_lock(create_engine(url)), contextlib.nullcontext)
