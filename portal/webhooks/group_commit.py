"""Group commit: the webhook deliveries that arrive together in one process share one durable transaction.

Each request thread hands its event row to the process's one committer and waits; the committer takes every
row waiting or arriving within `GATHER_SECONDS` (up to `MOST_IN_A_BATCH`), inserts them in one statement that
skips duplicates, takes back the replays of events retention has removed (one query for the batch), commits
(fsync: `synchronous=FULL` on SQLite, the server's own on PostgreSQL) and only then wakes the threads, which
answer 2xx. Nothing is answered before the commit that holds it; a process killed mid-batch answered none
of the batch, so the sender delivers those again. One writer per process also means a SQLite file sees
one lock request per batch instead of one per delivery, and on SQLite the writers of all processes take
turns (`database.writer_lock`) instead of polling for the file's lock.
"""

import logging
import queue
import threading
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, bindparam, delete, select
from sqlalchemy.dialects import postgresql, sqlite

from ..batches import gather
from ..database import DatabaseUnavailable, is_unavailable, writer_lock
from ..models import PrunedEvent, WebhookEvent

log = logging.getLogger(__name__)
MOST_IN_A_BATCH = 64
# How long the first delivery of a batch waits for others: a commit costs about as much CPU for one as for four
# (measured: batches of 1.0-2.0 on average without it, 2.9-3.7 with it, under wrk with 4 threads a worker).
GATHER_SECONDS = 0.001
KNOWN_SENDERS = 256
# Past this a delivery gives up waiting (its batch's own statements time out long before: DB_STATEMENT_TIMEOUT).
LONGEST_WAIT_SECONDS = 60


@dataclass
class _Pending:
    row: dict[str, Any]
    replay_keys: frozenset[str]  # ids under which retention would have kept this event had it been stored before
    done: threading.Event = field(default_factory=threading.Event)
    stored: bool = False
    error: BaseException | None = None


class GroupCommitter:
    """One per process and database: `store(row)` returns True when committed, False for a duplicate."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._waiting: queue.Queue[_Pending] = queue.Queue()  # not a SimpleQueue: see `batches`
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self.largest_batch = 0  # for tests and the curious: how many deliveries one transaction has held
        # The threads that have handed over deliveries: once all of them wait in a batch, no other can join it.
        self._senders: set[int] = set()
        dialect = {"postgresql": postgresql, "sqlite": sqlite}[engine.dialect.name]
        table = WebhookEvent.__table__
        # Without a conflict target: a second event id and, under hmac-sha256, a body seen before both skip.
        self._insert = dialect.insert(table).on_conflict_do_nothing().returning(table.c.event_id)
        self._pruned = select(PrunedEvent.event_id).where(PrunedEvent.event_id.in_(bindparam("keys")))

    def store(self, row: dict[str, Any], replay_keys: frozenset[str]) -> bool:
        """Commit `row` unless its event was stored before: still here (same id or, under hmac-sha256, same
        body) or removed by retention (one of `replay_keys` kept)."""
        pending = _Pending(row, replay_keys)
        if len(self._senders) > KNOWN_SENDERS:  # a server that starts a thread a request (the development one)
            self._senders.clear()
        self._senders.add(threading.get_ident())
        self._ensure_running()
        self._waiting.put(pending)
        if not pending.done.wait(LONGEST_WAIT_SECONDS):
            raise DatabaseUnavailable("the webhook commit did not finish in time")
        if pending.error is not None:
            raise pending.error
        return pending.stored

    def queued(self) -> int:
        """Deliveries waiting for the next batch (the one being committed not counted)."""
        return self._waiting.qsize()

    def _ensure_running(self) -> None:
        # Started on first use, in the process that serves: a thread does not survive gunicorn's fork. Nor does
        # a queue a thread waited on (its wake-up would go to the parent's thread): a new thread gets a new queue.
        if self._thread is not None and self._thread.is_alive():
            return
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._waiting = queue.Queue()
                self._thread = threading.Thread(
                    target=self._run, args=(self._waiting,), name="webhook-group-commit", daemon=True
                )
                self._thread.start()

    def _run(self, waiting: "queue.Queue[_Pending]") -> None:
        while True:
            batch = gather(waiting, [waiting.get()], GATHER_SECONDS, self._others_may_join)
            self.largest_batch = max(self.largest_batch, len(batch))
            self._commit(batch)

    def _others_may_join(self, batch: list[_Pending]) -> bool:
        return len(batch) < min(MOST_IN_A_BATCH, len(self._senders))

    def _commit(self, batch: list[_Pending]) -> None:
        try:
            self._insert_all(batch)
        except Exception as error:  # noqa: BLE001 - each delivery gets its own answer below
            if len(batch) == 1 or is_unavailable(error):  # the database is away: the same answer for all
                for pending in batch:
                    pending.error = error
            else:  # one bad row must not fail the rest: each alone, in its own transaction
                log.warning("webhook group commit of %d failed (%s); committing each alone", len(batch), type(error))
                for pending in batch:
                    self._commit([pending])
                return
        for pending in batch:
            pending.done.set()

    def _insert_all(self, batch: list[_Pending]) -> None:
        # The insert comes first: on SQLite it takes the write lock, so nothing changes between it and the
        # check below (a read first would have to upgrade to a write, which fails at once if another came between).
        with writer_lock(self._engine), self._engine.begin() as connection:
            new_ids = set(connection.scalars(self._insert, [pending.row for pending in batch]))
            replays = self._pruned_before(connection, [p for p in batch if p.row["event_id"] in new_ids])
            if replays:
                connection.execute(delete(WebhookEvent).where(WebhookEvent.event_id.in_(replays)))
        new_ids -= replays
        for pending in batch:  # the same id twice in one batch: the first is stored, the next a duplicate
            pending.stored = pending.row["event_id"] in new_ids
            new_ids.discard(pending.row["event_id"])

    def _pruned_before(self, connection: Connection, inserted: list[_Pending]) -> set[str]:
        """The ids of the rows just inserted whose event was stored once and removed by retention since."""
        keys = sorted(set().union(*(pending.replay_keys for pending in inserted)))
        pruned = set(connection.scalars(self._pruned, {"keys": keys})) if keys else set()
        return {pending.row["event_id"] for pending in inserted if pending.replay_keys & pruned}
