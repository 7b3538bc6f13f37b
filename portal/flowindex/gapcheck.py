"""Gap detection against the index: a flow's page, a refresh from the service, the check `flows sync` runs,
and flows only webhook events know of (the service answers 404 for them, or a complete sync never lists them).
"""

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import and_, exists, func, or_, select

from .. import current
from ..database import changed_rows
from ..extensions import db
from ..flowapi import FlowApiError, FlowClient, FlowDetail, FlowSummary, NotFound
from ..models import FlowRecord, WebhookEvent
from ..paging import KeysetPage, newest_first
from ..webhooks.store import event_document
from .gaps import FIRST_STATUS, EventHeard, Gap, Heard, ServiceSays, find_gap, heard_from
from .observations import WEBHOOK, from_detail, from_event, from_summary
from .store import apply_observations, index_record

log = logging.getLogger(__name__)
GAP_CHECKS = 100  # flows `flows sync` fetches at most to confirm a gap: bounded calls to the service


def portal_now() -> datetime:
    """The portal's clock (`portal.clock`, which tests move on) as an aware UTC time."""
    return current.now()


def _settings():
    return current.settings()


# -- one flow ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """A flow's retrieve response beside what its events told, and the gap between them if any."""

    service: ServiceSays
    heard: Heard  # what the portal knows: the events, and what a refresh from the service took as known
    gap: Gap | None
    events_said: Heard  # what the events alone said: after a refresh, `heard` may have moved past them


def compare(flow: FlowDetail, record: FlowRecord | None, events: Iterable[WebhookEvent], now: datetime) -> Comparison:
    """What the service says of `flow` against its index row and its events."""
    told = [_event_heard(flow.flow_id, event) for event in events]
    heard = heard_from(told, _kept_heard(record))
    service, settings = service_says(flow, record), _settings()
    gap = find_gap(service, heard, portal_webhook_url=settings.webhook_url, now=now, grace=settings.gap_grace_seconds)
    return Comparison(service, heard, gap, heard_from(told, Heard()))


def service_says(flow: FlowDetail, record: FlowRecord | None) -> ServiceSays:
    """The retrieve response, with the consent status the service's list gave the index (never an event's)."""
    listed = record if record is not None and record.status_source not in (None, WEBHOOK) else None
    return ServiceSays(
        version=flow.version,
        updated_at=flow.updated_at,
        consent_status=listed.consent_status if listed is not None else None,
        status_at=listed.status_at if listed is not None else None,
        lifecycle=flow.status,
        webhook_url=flow.data.webhook_url,
    )


def _kept_heard(record: FlowRecord | None) -> Heard:
    if record is None:
        return Heard()
    received = record.heard_at is not None or record.heard_version is not None
    return Heard(received, record.heard_version, record.heard_at, record.heard_status)


def _event_heard(flow_id: str, event: WebhookEvent) -> EventHeard:
    document = event_document(event)
    payload = document if isinstance(document, dict) else {}
    seen = from_event(
        flow_id, event.event_type, event.status, event.occurred_at, event.reference_id, payload, event.received_at
    )
    if seen is None:  # from_event reads no event without a flow id
        raise ValueError("an event heard for a flow needs the flow's id")
    return EventHeard(seen.state_at, seen.version, seen.consent_status, seen.lifecycle)


def flag_gap(flow: FlowDetail, record: FlowRecord | None, events: list[WebhookEvent]) -> Comparison:
    """The flow page's check, its gap kept in the index when it differs from what the index says."""
    now = portal_now()
    comparison = compare(flow, record, events, now)
    gap = comparison.gap
    kept = record.gap_reason if record is not None and record.gap_at is not None else None
    if record is not None and kept != (gap.stored if gap else None):
        note_gap(flow.flow_id, gap, now)
    return comparison


def note_gap(flow_id: str, gap: Gap | None, now: datetime) -> None:
    """Flag the flow in the index with the gap (since when it was first found), or clear its flag."""
    table = FlowRecord.__table__
    if gap is None:
        query = table.update().where(table.c.flow_id == flow_id, table.c.gap_at.is_not(None))
        db.session.execute(query.values(gap_at=None, gap_reason=None))
    else:
        query = table.update().where(table.c.flow_id == flow_id)
        db.session.execute(query.values(gap_at=func.coalesce(table.c.gap_at, now), gap_reason=gap.stored))
    db.session.commit()


def reconcile(flow: FlowDetail, now: datetime, listed: tuple[FlowSummary, bool] | None = None) -> None:
    """Write a flow just fetched as heard: what the service says is what the portal now knows.

    `listed` is the flow's list item (and whether from the archived list), which alone says its consent status.
    A later change without an event is then a gap again.
    """
    observations = [from_summary(*listed, now) if listed else None, from_detail(flow, now)]
    apply_observations([observation for observation in observations if observation], _settings().index_key)
    table = FlowRecord.__table__
    values = {
        "heard_at": flow.updated_at or now,
        "heard_status": func.coalesce(table.c.consent_status, table.c.heard_status),
        "gap_at": None,
        "gap_reason": None,
        "unknown_at": None,
    }
    if flow.version is not None:
        values["heard_version"] = flow.version
    db.session.execute(table.update().where(table.c.flow_id == flow.flow_id).values(values))
    db.session.commit()


def mark_unknown(flow_id: str, now: datetime) -> bool:
    """The service answered 404 for a flow id events named: flag its index row; True when flagged now."""
    table = FlowRecord.__table__
    has_events = exists().where(WebhookEvent.flow_id == flow_id)
    query = table.update().where(table.c.flow_id == flow_id, table.c.unknown_at.is_(None), has_events)
    flagged = changed_rows(query.values(unknown_at=now))
    db.session.commit()
    return bool(flagged)


def mark_unlisted_stubs(listed_since: datetime, now: datetime) -> int:
    """After a complete sync: flows known only from events, last heard of before `listed_since`, are unknown."""
    table = FlowRecord.__table__
    query = table.update().where(table.c.stub.is_(True), table.c.unknown_at.is_(None), table.c.seen_at < listed_since)
    count = changed_rows(query.values(unknown_at=now))
    db.session.commit()
    return count


# -- the check `flows sync` runs -----------------------------------------------------------------


@dataclass
class GapCheck:
    """What a check did: flows fetched, gaps found and cleared, flows the service did not know, why it stopped."""

    checked: int = 0
    found: int = 0
    cleared: int = 0
    unknown: int = 0
    waiting: int = 0  # changed within PORTAL_GAP_GRACE_SECONDS: their events may still come
    flagged: int = 0  # flows the index flags after the check
    stopped: str | None = None

    def line(self) -> str:
        line = f"gaps: {self.flagged} (checked {self.checked}, found {self.found}, cleared {self.cleared}"
        line += f", unknown to the service {self.unknown})" if self.unknown else ")"
        if self.waiting:
            grace = _settings().gap_grace_seconds
            line += f"; {self.waiting} changed within PORTAL_GAP_GRACE_SECONDS ({grace} s): a later sync judges them"
        return line + (f"; the check stopped: {self.stopped}" if self.stopped else "")


def check_gaps(
    client: FlowClient,
    most: int = GAP_CHECKS,
    between: Callable[[], None] | None = None,
    listed_since: datetime | None = None,
) -> GapCheck:
    """Fetch up to `most` flows whose index row suggests a missed change and flag or clear each; never loops.

    `listed_since`: the start of a complete sync walk, after which flows only events named are unknown.
    """
    check, now = GapCheck(), portal_now()
    if listed_since is not None:  # heard of before the walk began, and long enough for the list to show it
        settled = now - timedelta(seconds=_settings().gap_grace_seconds)
        check.unknown += mark_unlisted_stubs(min(listed_since, settled), now)
    for flow_id in candidates(now, most):
        try:
            flow = client.get_flow(flow_id)
        except NotFound:
            check.unknown += mark_unknown(flow_id, now)
            continue
        except FlowApiError as error:  # the sync's walk is written: say why the check ended, do not fail it
            check.stopped = error.summary
            break
        check.checked += 1
        _check_one(flow, now, check)
        if between:
            between()
    check.flagged = flagged_count()
    return check


def _check_one(flow: FlowDetail, now: datetime, check: GapCheck) -> None:
    apply_observations([from_detail(flow, now)], _settings().index_key)
    record = index_record(flow.flow_id)
    was_flagged = record is not None and record.gap_at is not None
    gap = compare(flow, record, (), now).gap
    note_gap(flow.flow_id, gap, now)
    check.found += gap is not None and not was_flagged
    check.cleared += gap is None and was_flagged
    grace = timedelta(seconds=_settings().gap_grace_seconds)
    check.waiting += gap is None and flow.updated_at is not None and now - flow.updated_at < grace


def candidates(now: datetime, most: int) -> list[str]:
    """Flows whose events came here and whose index row is ahead of them, or flagged before: newest change first."""
    if most <= 0:
        return []
    row, settled = FlowRecord, now - timedelta(seconds=_settings().gap_grace_seconds)
    ahead = or_(
        row.gap_at.is_not(None),
        row.version > row.heard_version,
        and_(row.consent_status != func.coalesce(row.heard_status, FIRST_STATUS), row.status_source != WEBHOOK),
        and_(row.updated_at > row.heard_at, row.updated_at < settled),
    )
    query = (
        select(row.flow_id)
        .where(row.heard_at.is_not(None), row.stub.is_(False), row.gone_at.is_(None), row.unknown_at.is_(None), ahead)
        .order_by(row.changed_at.desc(), row.id.desc())
        .limit(most)
    )
    return list(db.session.scalars(query))


def flagged_count() -> int:
    return db.session.scalar(select(func.count()).where(FlowRecord.gap_at.is_not(None))) or 0


# -- the admin page and the event pages -----------------------------------------------------------


def gap_page(before: int | None, limit: int) -> KeysetPage:
    """Flows flagged with a gap, newest row first."""
    return newest_first(select(FlowRecord).where(FlowRecord.gap_at.is_not(None)), FlowRecord, before, limit)


def unknown_page(before: int | None, limit: int) -> KeysetPage:
    """Flows only webhook events know of: the service answered 404, or a complete sync did not list them."""
    return newest_first(select(FlowRecord).where(FlowRecord.unknown_at.is_not(None)), FlowRecord, before, limit)


def event_counts(flow_ids: list[str]) -> dict[str, int]:
    if not flow_ids:
        return {}
    query = (
        select(WebhookEvent.flow_id, func.count())
        .where(WebhookEvent.flow_id.in_(flow_ids))
        .group_by(WebhookEvent.flow_id)
    )
    # flow_id is one of flow_ids, never None
    return {flow_id: count for flow_id, count in db.session.execute(query) if flow_id is not None}


def unknown_flows(flow_ids: Iterable[str | None]) -> set[str]:
    """Of these flow ids, the ones the Flow Service does not know."""
    named = {flow_id for flow_id in flow_ids if flow_id}
    if not named:
        return set()
    query = select(FlowRecord.flow_id).where(FlowRecord.flow_id.in_(named), FlowRecord.unknown_at.is_not(None))
    return set(db.session.scalars(query))
