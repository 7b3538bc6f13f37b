"""One background sender per process: woken when something is queued, and again when the next notice is due."""

import atexit
import logging
import os
import threading
from datetime import datetime, timezone

from flask import Flask

from ..extensions import db
from .dispatch import Clock, SendReport, next_due, send_due
from .triggers import scan

log = logging.getLogger(__name__)
IDLE_SECONDS = 60.0  # with nothing due, look for new incidents this often
MIN_WAIT_SECONDS = 0.05


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Notifier:
    """Started on first use, again after a fork (a worker inherits no threads); a daemon."""

    def __init__(self, app: Flask, clock: Clock = utc_now):
        self.app = app
        self.clock = clock
        self._wake = threading.Event()
        self._start_lock = threading.Lock()
        self._pid: int | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        atexit.register(self.close)

    @property
    def settings(self):
        return self.app.extensions["portal.settings"]

    def wake(self) -> None:
        """Look for new incidents and send what is due, soon, off the caller's thread."""
        self._ensure_thread()
        self._wake.set()

    def run_once(self, stuck: bool = True) -> tuple[int, SendReport]:
        """Scan and send what is due, in the caller's thread and app context: notices queued, and the report."""
        queued = scan(self.settings, self.clock(), stuck=stuck)
        return queued, send_due(self.settings, self.clock)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread after its current pass (an app torn down in tests, a worker shutting down)."""
        if self._pid == os.getpid() and self._thread:
            self._stop.set()
            self._wake.set()
            self._thread.join(timeout)
            self._pid = self._thread = None

    def start(self) -> None:
        """Make sure this process has its sending thread."""
        self._ensure_thread()

    def _ensure_thread(self) -> None:
        if self._pid == os.getpid():
            return
        with self._start_lock:
            if self._pid != os.getpid():
                self._wake, self._stop = threading.Event(), threading.Event()
                self._thread = threading.Thread(
                    target=self._run, args=(self._wake, self._stop), name="notifier", daemon=True
                )
                self._thread.start()
                self._pid = os.getpid()

    def _run(self, wake: threading.Event, stop: threading.Event) -> None:
        while not stop.is_set():
            wait = self._pass()
            wake.wait(wait)
            wake.clear()

    def _pass(self) -> float:
        """Incidents scanned, due notices sent; seconds until the next one is due."""
        with self.app.app_context():
            try:
                self.run_once(stuck=False)  # stuck flows: `flows sync` and `notifications send` look for those
                due = next_due()
            except Exception:  # a lost database or a bug: the next pass tries again
                log.exception("notifications: a sending pass failed")
                due = None
            finally:
                db.session.remove()
        if due is None:
            return IDLE_SECONDS
        return min(max((due - self.clock()).total_seconds(), MIN_WAIT_SECONDS), IDLE_SECONDS)
