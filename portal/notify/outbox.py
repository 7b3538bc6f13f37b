"""The outbox: one row per configured channel for each thing worth telling, written once."""

import json
import uuid
from datetime import datetime
from urllib.parse import quote

from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from ..extensions import db
from ..masking import mask_document, mask_text
from ..models import Notification

WEBHOOK, EMAIL = "webhook", "email"
EVENT_TYPES = {"incident": "portal.flow.incident", "stuck": "portal.flow.stuck", "test": "portal.test"}
SUBJECT_LENGTH = 255


def configured_channels(settings) -> tuple[str, ...]:
    """The channels notices go out on: a webhook URL, an SMTP host, both or neither."""
    return tuple(
        channel for channel, configured in ((WEBHOOK, settings.notify_url), (EMAIL, settings.smtp_host)) if configured
    )


def flow_url(settings, flow_id: str) -> str:
    """The flow's page in the portal, for people reading a notice."""
    return f"{settings.public_url.rstrip('/')}/flows/{quote(flow_id, safe='')}"


def message(kind: str, now: datetime, data: dict) -> dict:
    """The JSON a receiver gets: its id doubles as the `webhook-id`, the same on every retry."""
    return {"id": f"msg_{uuid.uuid4().hex}", "type": EVENT_TYPES[kind], "timestamp": now.isoformat(), "data": data}


def queue_notice(
    settings, kind: str, dedupe_key: str, flow_id: str | None, subject: str, payload: dict, now: datetime
) -> int:
    """Queue a notice on every configured channel, unless one with this key is there already; how many rows."""
    channels = configured_channels(settings)
    if not channels:
        return 0
    document = json.dumps(mask_document(message(kind, now, payload)), ensure_ascii=False, sort_keys=True)
    rows = [
        {
            "channel": channel,
            "kind": kind,
            "dedupe_key": dedupe_key[:255],
            "flow_id": flow_id,
            "subject": mask_text(subject)[:SUBJECT_LENGTH],
            "payload": document,
            "status": "pending",
            "attempts": 0,
            "next_attempt_at": now,
            "created_at": now,
        }
        for channel in channels
    ]
    insert = postgresql_insert if db.session.get_bind().dialect.name == "postgresql" else sqlite_insert
    statement = insert(Notification).values(rows).on_conflict_do_nothing(index_elements=["channel", "dedupe_key"])
    return len(db.session.execute(statement.returning(Notification.id)).all())
