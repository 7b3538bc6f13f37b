"""Sending what is due: claim rows safely across processes, attempt once each, record how it went."""

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select, update

from ..database import changed_rows
from ..extensions import db
from ..models import Notification, NotificationAttempt
from .email import send_mail
from .outbox import EMAIL, WEBHOOK
from .outcome import Outcome
from .webhook import post_notice

log = logging.getLogger(__name__)
Clock = Callable[[], datetime]
CLAIM_BATCH = 20
# A claimed row is due again after this long: a process that died mid-attempt does not lose the notice.
CLAIM_LEASE = timedelta(minutes=5)
MAX_BACKOFF = timedelta(hours=6)
JITTER = 0.1  # up to 10 % later, so notices failed together are not all retried in the same second


@dataclass
class SendReport:
    sent: int = 0
    retrying: int = 0
    failed: int = 0
    details: list[str] = field(default_factory=list)

    def summary(self) -> str:
        return f"sent {self.sent}, to retry {self.retrying}, failed {self.failed}"


def backoff(settings, attempts: int, jitter: Callable[[], float] = random.random) -> timedelta:
    """How long after failed attempt number `attempts` the next one is due: doubling, a little jitter, capped."""
    seconds = settings.notify_backoff_seconds * 2 ** (attempts - 1) * (1 + JITTER * jitter())
    return min(timedelta(seconds=seconds), MAX_BACKOFF)


def _due(now: datetime):
    return (Notification.status == "pending") & (Notification.next_attempt_at <= now)


def claim_due(now: datetime, limit: int = CLAIM_BATCH) -> list[int]:
    """Take up to `limit` due notices for this worker: counted as attempted and leased, so no one else sends them."""
    query = select(Notification.id, Notification.attempts).where(_due(now))
    query = query.order_by(Notification.next_attempt_at, Notification.id).limit(limit)
    if db.session.get_bind().dialect.name == "postgresql":
        query = query.with_for_update(skip_locked=True)  # rows another worker is claiming are passed over
    claimed = [row_id for row_id, attempts in db.session.execute(query).all() if _take(row_id, attempts, now)]
    db.session.commit()
    return claimed


def _take(row_id: int, attempts: int, now: datetime) -> bool:
    """The conditional claim: only if nobody counted an attempt since the row was read (SQLite has no row locks)."""
    taken = changed_rows(
        update(Notification)
        .where(Notification.id == row_id, Notification.attempts == attempts, _due(now))
        .values(attempts=attempts + 1, next_attempt_at=now + CLAIM_LEASE)
        .execution_options(synchronize_session=False)
    )
    return taken == 1


def deliver(settings, channel: str, subject: str, message: dict, now: datetime) -> Outcome:
    """One try on one channel; a bug in it costs this attempt, not the pass."""
    try:
        return _deliver(settings, channel, subject, message, now)
    except Exception as error:
        log.exception("notifications: a %s delivery failed unexpectedly", channel)
        return Outcome.retry(f"failed unexpectedly ({type(error).__name__})")


def _deliver(settings, channel: str, subject: str, message: dict, now: datetime) -> Outcome:
    if channel == WEBHOOK and settings.notify_url:
        return post_notice(settings, message["id"], json.dumps(message, ensure_ascii=False), now)
    if channel == EMAIL and settings.smtp_host:
        return send_mail(settings, subject, message)
    return Outcome.stop(f"the {channel} channel is no longer configured")


def attempt(settings, row_id: int, clock: Clock) -> Outcome:
    """One try at a claimed notice; no transaction is held open while the receiver answers."""
    row = db.session.get_one(Notification, row_id)
    channel, subject, message = row.channel, row.subject, json.loads(row.payload)
    db.session.commit()
    started = time.perf_counter()
    outcome = deliver(settings, channel, subject, message, clock())
    record(settings, row_id, outcome, clock(), round((time.perf_counter() - started) * 1000))
    return outcome


def record(settings, row_id: int, outcome: Outcome, now: datetime, duration_ms: int) -> None:
    """Save the attempt and what comes next: sent, another try after the backoff, or failed for good."""
    row = db.session.get_one(Notification, row_id)
    db.session.add(
        NotificationAttempt(
            notification_id=row_id, at=now, ok=outcome.ok, detail=outcome.detail, duration_ms=duration_ms
        )
    )
    row.last_error = None if outcome.ok else outcome.detail
    if outcome.ok:
        row.status, row.sent_at, row.next_attempt_at = "sent", now, None
    elif outcome.give_up or row.attempts >= settings.notify_max_attempts:
        row.status, row.next_attempt_at = "failed", None
    else:
        row.next_attempt_at = now + backoff(settings, row.attempts)
    db.session.commit()


def send_due(settings, clock: Clock) -> SendReport:
    """Attempt every notice due now, once each."""
    report = SendReport()
    while claimed := claim_due(clock()):
        for row_id in claimed:
            outcome = attempt(settings, row_id, clock)
            if outcome.ok:
                report.sent += 1
            elif outcome.give_up or db.session.get_one(Notification, row_id).status == "failed":
                report.failed += 1
            else:
                report.retrying += 1
            report.details.append(outcome.detail)
    return report


def next_due() -> datetime | None:
    """When the earliest pending notice is due, if any is."""
    return db.session.scalar(select(func.min(Notification.next_attempt_at)).where(Notification.status == "pending"))
