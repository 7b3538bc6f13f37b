"""The durable event store: verified events once per id, and a bounded record of rejections."""

import hashlib
import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone

from sqlalchemy import delete, func, or_, select
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from ..flowapi.models import parse_timestamp
from ..models import RejectedDelivery, WebhookEvent
from ..paging import KeysetPage, newest_first
from .schemes import Verified
from .shape import EventFields

BODY_HEAD_BYTES = 4096
_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
# A day inside what a datetime holds, so that every time zone can still show the moment.
EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 30, tzinfo=timezone.utc)


def clean_text(value: str | None, limit: int) -> str | None:
    """Text any database stores: lone surrogates as U+FFFD, no NUL or other control characters, bounded."""
    if value is None:
        return None
    text = _CONTROL.sub("", _SURROGATE.sub("\ufffd", value)).strip()[:limit]
    return text or None


def usable_event_id(value: str | None) -> bool:
    return isinstance(value, str) and 0 < len(value) <= 255 and value.isprintable()


def event_id_for(candidates: list[str | None], body: bytes) -> str:
    """The first id given, else a hash of the raw body, so a redelivery of the same bytes is a duplicate.

    An id that is given but unusable (control characters, over 255 characters) is kept as its hash:
    the event is stored and its redeliveries still deduplicate.
    """
    for given in candidates:
        if given:
            if usable_event_id(given):
                return given
            return "id-sha256:" + hashlib.sha256(given.encode("utf-8", "surrogatepass")).hexdigest()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def storable_moment(raw: str | None) -> datetime | None:
    """The event time in UTC, or None when absent, unreadable or too close to the ends of time."""
    if raw is None:
        return None
    try:
        moment = parse_timestamp(raw)
        moment = moment.astimezone(timezone.utc) if moment is not None else None
    except (ValueError, OverflowError, OSError, TypeError):
        return None
    return moment if moment is not None and EARLIEST <= moment <= LATEST else None


def record_event(
    verified: Verified, event_id: str, fields: EventFields, body: bytes, headers: dict, source_ip: str | None
) -> bool:
    """Commit the event; False when an event with this id was stored before (a redelivery)."""
    occurred_at = storable_moment(fields.timestamp)
    db.session.add(
        WebhookEvent(
            event_id=event_id,
            event_type=clean_text(fields.event_type, 100),
            flow_id=clean_text(fields.flow_id, 100),
            reference_id=clean_text(fields.reference_id, 100),
            status=clean_text(fields.status, 40),
            occurred_at=occurred_at,
            occurred_at_raw=clean_text(fields.timestamp, 64) if occurred_at is None else None,
            # Valid UTF-8 JSON, so it holds no surrogate and no raw NUL (JSON escapes them as ASCII).
            body=body.decode("utf-8"),
            headers=json.dumps(headers),  # ASCII: json escapes whatever a header carried
            scheme=verified.scheme,
            secret_index=verified.secret_index,
            source_ip=(source_ip or "")[:64] or None,
        )
    )
    try:
        db.session.commit()
        return True
    except IntegrityError:
        db.session.rollback()
        return False


def event_document(event: WebhookEvent):
    """The stored body to show: the parsed JSON with lone surrogates as U+FFFD, else the text as stored."""
    try:
        document = json.loads(event.body)
        text = json.dumps(document, ensure_ascii=False)
    except (ValueError, RecursionError):
        return event.body
    # A `\ud800` escape parses to a lone surrogate, which no UTF-8 page or terminal can carry.
    return json.loads(_SURROGATE.sub("\ufffd", text)) if _SURROGATE.search(text) else document


def record_rejection(reason: str, source_ip: str | None, headers: dict, body_head: bytes, keep: int) -> None:
    """Keep the rejection for admins, and only the newest `keep` of them."""
    db.session.add(
        RejectedDelivery(
            reason=clean_text(reason, 255) or "unknown",
            source_ip=(source_ip or "")[:64] or None,
            signature_headers=json.dumps(headers),
            body_head=body_head[:BODY_HEAD_BYTES].decode("utf-8", errors="replace").replace("\x00", "\ufffd"),
        )
    )
    db.session.flush()
    newest_kept = select(RejectedDelivery.id).order_by(RejectedDelivery.id.desc()).offset(keep).limit(1)
    cutoff = db.session.scalar(newest_kept)
    if cutoff is not None:
        db.session.execute(delete(RejectedDelivery).where(RejectedDelivery.id <= cutoff))
    db.session.commit()


def events_for_flow(flow_id: str, reference_id: str | None) -> list[WebhookEvent]:
    """The flow's events, oldest first: its timeline."""
    match = WebhookEvent.flow_id == flow_id
    if reference_id:
        match = or_(match, WebhookEvent.reference_id == reference_id)
    ordered = (func.coalesce(WebhookEvent.occurred_at, WebhookEvent.received_at), WebhookEvent.id)
    return list(db.session.scalars(select(WebhookEvent).where(match).order_by(*ordered).limit(500)))


def find_events(*, event_type: str | None, flow: str | None, before: int | None, limit: int) -> KeysetPage:
    """Newest first, filtered by type and by flow id or referenceId."""
    query = select(WebhookEvent)
    if event_type:
        query = query.where(WebhookEvent.event_type == event_type)
    if flow:
        query = query.where(or_(WebhookEvent.flow_id == flow, WebhookEvent.reference_id == flow))
    return newest_first(query, WebhookEvent, before, limit)


def event_types() -> list[str]:
    return [
        kind
        for kind in db.session.scalars(
            select(WebhookEvent.event_type)
            .where(WebhookEvent.event_type.is_not(None))
            .distinct()
            .order_by(WebhookEvent.event_type)
        )
    ]


def prune_events(older_than: datetime) -> int:
    result = db.session.execute(delete(WebhookEvent).where(WebhookEvent.received_at < older_than))
    db.session.commit()
    return result.rowcount


def iter_events(since: datetime | None, batch: int = 500) -> Iterator[WebhookEvent]:
    """Every stored event received at or after `since`, oldest first, read in batches."""
    last_id = 0
    while True:
        query = select(WebhookEvent).where(WebhookEvent.id > last_id)
        if since:
            query = query.where(WebhookEvent.received_at >= since)
        rows = list(db.session.scalars(query.order_by(WebhookEvent.id).limit(batch)))
        yield from rows
        if len(rows) < batch:
            return
        last_id = rows[-1].id
