"""Write-behind: pages hand what they saw to a background thread, which writes it to the index.

A page pays for one queue put (microseconds); reading national ids, hashing them and writing the
rows happens off the request, in batches. `flush()` waits until everything handed over is written
(tests, `flows sync`, shutdown).
"""

import atexit
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, timezone

from flask import Flask

from ..batches import gather
from ..database import writer_lock
from ..extensions import db
from ..notify import incidents_recorded
from .observations import Observation
from .store import apply_observations

log = logging.getLogger(__name__)
MAX_BATCH = 500
GATHER_SECONDS = 0.02  # how long a busy writer waits to fill a batch: the index may lag this much
BUSY_WITHIN = 0.1  # work arriving this soon after a write finds the writer busy
SHUTDOWN_FLUSH_SECONDS = 5
# A flow seen again exactly as it was written less than this long ago is not written again: staff
# reloading a page cost the database nothing, and `seen_at`/`listed_at` are exact to this much.
REWRITE_AFTER = timedelta(seconds=60)
MAX_REMEMBERED = 100_000

# Flow id -> what was written of it (without its times: `_timeless`), and when it was seen.
Written = dict[str, tuple[Observation, datetime]]
# A job turns into observations in the writer thread; building them is the costly part.
Job = Callable[[], Iterable[Observation | None]]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class IndexWriter:
    """One background writer per process (started on first use, again after a fork)."""

    def __init__(self, app: Flask):
        self.app = app
        self._jobs: queue.Queue[Job | None] = queue.Queue()  # None: stop. Not a SimpleQueue: see `batches`
        self._pending = 0
        self._idle = threading.Condition()
        self._pid: int | None = None
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()
        self._written: Written = {}
        self._handed: dict[str, tuple[object, datetime]] = {}  # a source's key -> what it said, when
        atexit.register(self.flush, SHUTDOWN_FLUSH_SECONDS)

    def submit(self, job: Job) -> None:
        """Hand over work without waiting for it."""
        self._ensure_thread()
        with self._idle:
            self._pending += 1
        self._jobs.put(job)

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every job handed over so far is written; False if `timeout` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Write what is pending and stop the thread (an app torn down in tests, a worker shutting down)."""
        if self._pid == os.getpid():
            self.flush(timeout)
            self._jobs.put(None)
            self._pid = None

    def _ensure_thread(self) -> None:
        if self._pid == os.getpid():
            return
        with self._start_lock:
            if self._pid != os.getpid():  # a forked worker inherits no threads: start its own
                self._jobs = queue.Queue()
                self._thread = threading.Thread(target=self._run, name="flow-index-writer", daemon=True)
                self._thread.start()
                self._pid = os.getpid()

    def _run(self) -> None:
        jobs_queue, last_write = self._jobs, -BUSY_WITHIN
        while True:
            jobs = [jobs_queue.get()]
            # Under load (work came again soon after the last write) wait a moment for more: a write costs about
            # the same for one flow as for thirty, and on SQLite it holds the one write lock of every process.
            busy = time.monotonic() - last_write < BUSY_WITHIN
            gather(jobs_queue, jobs, GATHER_SECONDS if busy else 0, _open_and_not_full)
            if jobs[-1] is None:  # closed
                return
            self._write([job for job in jobs if job is not None])  # all of them: None comes last, and closes
            last_write = time.monotonic()
            with self._idle:
                self._pending -= len(jobs)
                self._idle.notify_all()

    def said_lately(self, key: str, said: object, seen_at: datetime) -> bool:
        """Whether a source said exactly `said` of `key` less than REWRITE_AFTER ago; else remember it.

        A list page reloaded unchanged is dropped before its items are even read (comparing the item's JSON
        costs less than reading it). Request threads ask it at once: a race between two of them costs at most
        one write the writer drops again (`_not_written_lately`).
        """
        last = self._handed.get(key)
        if last and last[0] == said and seen_at - last[1] < REWRITE_AFTER:
            return True
        if len(self._handed) > MAX_REMEMBERED:
            self._handed.clear()
        self._handed[key] = (said, seen_at)
        return False

    def _not_written_lately(self, observations: Iterable[Observation | None]) -> tuple[list[Observation], Written]:
        """The observations to write, and what `_remember` keeps of them once written (each flow's last)."""
        fresh: list[Observation] = []
        in_batch: Written = {}
        for observation in observations:
            if observation is None:
                continue
            timeless = _timeless(observation)
            written = in_batch.get(observation.flow_id) or self._written.get(observation.flow_id)
            if not (written and written[0] == timeless and observation.seen_at - written[1] < REWRITE_AFTER):
                fresh.append(observation)
                in_batch[observation.flow_id] = (timeless, observation.seen_at)
        return fresh, in_batch

    def _remember(self, written: Written) -> None:
        if len(self._written) > MAX_REMEMBERED:
            self._written.clear()
        self._written.update(written)

    def _write(self, jobs: list[Job]) -> None:
        with self.app.app_context():
            try:
                observations, written = self._not_written_lately(observation for job in jobs for observation in job())
                if not observations:
                    return  # all said before: no write lock, no transaction
                with writer_lock(db.engine):
                    apply_observations(observations, self.app.extensions["portal.settings"].index_key)
                self._remember(written)
                if any(observation.incidents and observation.incidents.incidents for observation in observations):
                    incidents_recorded()  # a notice of a new incident goes out within seconds, not at the next check
            except Exception:  # the index is a cache of what the service says: `flows sync` repairs a lost write
                log.exception("flow index: %d updates could not be written", len(jobs))
            finally:
                _discard_session()


def _open_and_not_full(jobs: list[Job | None]) -> bool:
    return len(jobs) < MAX_BATCH and jobs[-1] is not None


def _discard_session() -> None:
    """End the thread's session; on a lost connection even its rollback fails, and the pool replaces it."""
    try:
        db.session.remove()
    except Exception as error:
        log.warning("flow index: the database connection was lost (%s)", type(error).__name__)
        db.session.registry.clear()


def _timeless(observation: Observation) -> Observation:
    """The observation without its times: equal when a source says the same thing again.

    A copy of its fields, not `dataclasses.replace`, which runs `__init__` again: a tenth of the cost, and each
    webhook event and list row comes here (measured: a fifth of the writer's time for events of new flows)."""
    timeless = object.__new__(Observation)
    timeless.__dict__.update(vars(observation), seen_at=EPOCH, state_at=EPOCH)
    return timeless


EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
