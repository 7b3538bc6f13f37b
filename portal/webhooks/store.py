"""The durable event store: verified events once per id, and a bounded record of rejections."""

import json
from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import delete, func, or_, select
from sqlalchemy.exc import IntegrityError

from ..extensions import db
from ..flowapi.models import parse_timestamp
from ..models import RejectedDelivery, WebhookEvent
from ..paging import KeysetPage, newest_first
from .schemes import Verified

BODY_HEAD_BYTES = 4096


def _text_field(source, name: str, limit: int) -> str | None:
    value = source.get(name) if isinstance(source, dict) else None
    return value.replace("\x00", "")[:limit] if isinstance(value, str) else None  # PostgreSQL text takes no NUL


def record_event(
    verified: Verified, event_id: str, payload: dict, body: bytes, headers: dict, source_ip: str | None
) -> bool:
    """Commit the event; False when an event with this id was stored before (a redelivery)."""
    data = payload.get("data") if isinstance(payload.get("data"), dict) else {}
    db.session.add(
        WebhookEvent(
            event_id=event_id,
            event_type=_text_field(payload, "type", 100),
            flow_id=_text_field(data, "flowId", 100),
            reference_id=_text_field(data, "referenceId", 100),
            status=_text_field(data, "status", 40),
            occurred_at=parse_timestamp(payload.get("timestamp")),
            body=body.decode("utf-8"),
            headers=json.dumps(headers),
            scheme=verified.scheme,
            secret_index=verified.secret_index,
            source_ip=source_ip,
        )
    )
    try:
        db.session.commit()
        return True
    except IntegrityError:
        db.session.rollback()
        return False


def record_rejection(reason: str, source_ip: str | None, headers: dict, body_head: bytes, keep: int) -> None:
    """Keep the rejection for admins, and only the newest `keep` of them."""
    db.session.add(
        RejectedDelivery(
            reason=reason[:255],
            source_ip=source_ip,
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
