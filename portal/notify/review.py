"""What the admin page shows and does: channels, notices with their attempts, a test notice, a retry."""

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import urlsplit

from sqlalchemy import select, update

from ..database import changed_rows
from ..extensions import db
from ..models import Notification, NotificationAttempt
from ..paging import KeysetPage, newest_first
from .outbox import EMAIL, WEBHOOK, configured_channels, queue_notice


@dataclass(frozen=True)
class Channel:
    name: str
    destination: str  # where notices go, without any secret: a host, addresses


def channels(settings) -> list[Channel]:
    """The configured channels, said without secrets: the webhook's host, the mail server and recipients."""
    shown = []
    if settings.notify_url:
        parts = urlsplit(settings.notify_url)
        shown.append(Channel(WEBHOOK, f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")))
    if settings.smtp_host:
        recipients = ", ".join(settings.notify_email_to)
        shown.append(Channel(EMAIL, f"{recipients} (via {settings.smtp_host}:{settings.smtp_port})"))
    return shown


def notices(before: int | None, limit: int) -> KeysetPage:
    return newest_first(select(Notification), Notification, before, limit)


def attempts_of(notification_ids: list[int]) -> dict[int, list[NotificationAttempt]]:
    """Each notice's attempts, oldest first."""
    found = defaultdict(list)
    if notification_ids:
        query = select(NotificationAttempt).where(NotificationAttempt.notification_id.in_(notification_ids))
        for attempt in db.session.scalars(query.order_by(NotificationAttempt.at, NotificationAttempt.id)):
            found[attempt.notification_id].append(attempt)
    return found


def queue_test(settings, now: datetime) -> tuple[str, ...]:
    """A test notice on every configured channel, due now; the channels."""
    data = {"message": "A test notice from the Flow Portal: notices reach you."}
    queue_notice(settings, "test", f"test:{uuid.uuid4().hex}", None, "Flow Portal: test notice", data, now)
    db.session.commit()
    return configured_channels(settings)


def retry_now(notification_id: int, now: datetime) -> bool:
    """A failed notice gets one more attempt, due now; False when it is not a failed one."""
    retried = changed_rows(
        update(Notification)
        .where(Notification.id == notification_id, Notification.status == "failed")
        .values(status="pending", next_attempt_at=now)
        .execution_options(synchronize_session=False)
    )
    db.session.commit()
    return retried == 1
