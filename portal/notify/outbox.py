"""The outbox: one row per configured channel for each thing worth telling, written once."""

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from urllib.parse import quote

from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from ..extensions import db
from ..flowlinks import in_url
from ..masking import mask_document, mask_text
from ..models import Notification

WEBHOOK, EMAIL = "webhook", "email"
EVENT_TYPES = {"incident": "portal.flow.incident", "stuck": "portal.flow.stuck", "test": "portal.test"}
SUBJECT_LENGTH = 255
HELD_BACK = "held_back"


def configured_channels(settings) -> tuple[str, ...]:
    """The channels notices go out on: a webhook URL, an SMTP host, both or neither."""
    return tuple(
        channel for channel, configured in ((WEBHOOK, settings.notify_url), (EMAIL, settings.smtp_host)) if configured
    )


def flow_url(settings, flow_id: str) -> str:
    """The flow's page in the portal, for people reading a notice."""
    return f"{settings.public_url.rstrip('/')}/flows/{quote(in_url(flow_id, settings.secret_key), safe='')}"


def message(kind: str, now: datetime, data: dict) -> dict:
    """The JSON a receiver gets, its data masked; the id doubles as the `webhook-id`, the same on every retry."""
    return {
        "id": f"msg_{uuid.uuid4().hex}",  # not masked: a run of its hex digits may look like an id number
        "type": EVENT_TYPES[kind],
        "timestamp": now.isoformat(),
        "data": mask_document(data),
    }


@dataclass(frozen=True)
class Notice:
    """Something worth telling, once: `dedupe_key` names the happening."""

    kind: str
    dedupe_key: str
    flow_id: str | None
    subject: str
    data: dict
    held_back: bool = False  # recorded as told, never sent (a flood of incidents on one flow)


def queue_notices(settings, notices: Iterable[Notice], now: datetime) -> int:
    """Queue each notice on every configured channel, unless one with its key is there already; rows queued."""
    channels = configured_channels(settings)
    rows = [row for notice in notices for row in _rows(notice, channels, now)]
    if not rows:
        return 0
    insert = postgresql_insert if db.session.get_bind().dialect.name == "postgresql" else sqlite_insert
    table = Notification.__table__
    statement = insert(table).on_conflict_do_nothing(index_elements=["channel", "dedupe_key"]).returning(table.c.id)
    return len(db.session.execute(statement, rows).all())  # batched by SQLAlchemy; only inserted rows come back


def queue_notice(
    settings, kind: str, dedupe_key: str, flow_id: str | None, subject: str, data: dict, now: datetime
) -> int:
    return queue_notices(settings, [Notice(kind, dedupe_key, flow_id, subject, data)], now)


def _rows(notice: Notice, channels: tuple[str, ...], now: datetime) -> list[dict]:
    document = json.dumps(message(notice.kind, now, notice.data), ensure_ascii=False, sort_keys=True)
    return [
        {
            "channel": channel,
            "kind": notice.kind,
            "dedupe_key": notice.dedupe_key[:255],
            "flow_id": notice.flow_id,
            "subject": mask_text(notice.subject)[:SUBJECT_LENGTH],
            "payload": document,
            "status": HELD_BACK if notice.held_back else "pending",
            "attempts": 0,
            "next_attempt_at": None if notice.held_back else now,
            "created_at": now,
        }
        for channel in channels
    ]
