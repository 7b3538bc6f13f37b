"""`flask --app portal notifications ...`: one sending pass (for cron), and a test notice."""

import click
from flask.cli import AppGroup
from sqlalchemy import select

from .. import current
from ..extensions import db
from ..models import Notification
from . import notifier
from .outbox import configured_channels
from .review import queue_test

notifications = AppGroup("notifications", help="Outgoing notices of incidents and stuck flows (webhook, e-mail).")
NOT_CONFIGURED = "notifications are off: set PORTAL_NOTIFY_URL and PORTAL_NOTIFY_SECRET, or PORTAL_SMTP_HOST"


def _settings():
    return current.settings()


@notifications.command("send")
def send():
    """Look for new incidents and stuck flows, and send every notice that is due (one pass; cron-safe)."""
    if not configured_channels(_settings()):
        click.echo(NOT_CONFIGURED)
        return
    queued, report = notifier().run_once()
    click.echo(f"notifications: queued {queued}; {report.summary()}")


@notifications.command("test")
def test():
    """Queue a test notice on every configured channel and send it now."""
    if not configured_channels(_settings()):
        raise click.ClickException(NOT_CONFIGURED)
    sender = notifier()
    started = sender.clock()
    queue_test(_settings(), started)
    notifier().run_once(stuck=False)
    query = select(Notification).where(Notification.kind == "test", Notification.created_at >= started)
    failed = False
    for row in db.session.scalars(query.order_by(Notification.id)):
        click.echo(f"{row.channel}: {row.status}" + (f" ({row.last_error})" if row.last_error else ""))
        failed = failed or row.status != "sent"
    if failed:
        raise click.ClickException("a test notice was not delivered; see above and /admin/notifications")


def scan_after_sync() -> str | None:
    """The line `flows sync` prints after looking for incidents and stuck flows and sending; None when off."""
    if not configured_channels(_settings()):
        return None
    queued, report = notifier().run_once()
    return f"notifications: queued {queued}; {report.summary()}"
