"""Optional outgoing notices when a flow gets an incident or is stuck: a signed JSON webhook and e-mail.

Rows are queued in an outbox (`notifications`), one per channel and happening, and sent with retries by a
background thread per process, by `flows sync` and by `flask --app portal notifications send`.
"""

from flask import Flask, current_app

from .. import current
from ..extensions import db
from .outbox import configured_channels, queue_notice
from .worker import Notifier

EXTENSION = "portal.notify"


def init_app(app: Flask) -> None:
    app.extensions[EXTENSION] = Notifier(app)

    @app.before_request
    def start_notifier():
        """A restarted worker sends what was left due (a cheap check when it runs already)."""
        if configured_channels(app.extensions["portal.settings"]):
            app.extensions[EXTENSION].start()


def notifier() -> Notifier:
    return current_app.extensions[EXTENSION]


def enqueue(kind: str, dedupe_key: str, flow_id: str | None, subject: str, payload: dict) -> int:
    """Queue a notice on every configured channel (once per key), commit, and wake the sender; rows queued."""
    sender = notifier()
    settings = current.settings()
    queued = queue_notice(settings, kind, dedupe_key, flow_id, subject, payload, sender.clock())
    db.session.commit()
    if queued:
        sender.wake()
    return queued


def incidents_recorded() -> None:
    """For code that has just stored an incident: the sender looks for new ones now, not at its next idle check."""
    if configured_channels(current.settings()):
        notifier().wake()
