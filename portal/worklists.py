"""Work lists for support staff, from the flow index and its incidents: stuck flows and the incident queue.

A flow is *stuck* when its consent is not done (Unopened, Opened or not known), it is neither completed
nor cancelled, archived, gone from the service nor known only from a webhook event, and nothing changed
for longer than a set time. Its *last change* is the service's `updatedAt` when the index has it (and
it is not older than the opening the index knows of); else when it was first known opened; else its
creation; else when the portal first saw it. Not `status_at`: a list fetch moves that without a change.
The index writer keeps it in `flow_index.last_change_at`, read in order from a partial index of the flows not done.

Lists are oldest first and paged by keyset (a cursor of the last row's time and row id).
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import overload

from sqlalchemy import and_, bindparam, func, literal, or_, select, true, tuple_

from .extensions import db
from .models import FlowIncident, FlowRecord

OPEN_CONSENT = ("Unopened", "Opened")
FINISHED_LIFECYCLES = ("completed", "cancelled")
MAX_LIMIT = 500
COUNT_CAP = 10_000  # past this many stuck flows the page says "more than", so counting stays fast
ACTION_SEPARATOR = ","


@dataclass(frozen=True)
class Cursor:
    """Where a page ended: the last row's time and id; the next page starts after it."""

    at: datetime
    row_id: int

    def text(self) -> str:
        return f"{int(self.at.timestamp() * 1_000_000)}.{self.row_id}"


def read_cursor(raw: str | None) -> Cursor | None:
    """A cursor from the query string (`<microseconds>.<row id>`), or None when it is not one."""
    micros, dot, row_id = (raw or "").strip().partition(".")
    if not (dot and micros.isascii() and micros.isdigit() and row_id.isascii() and row_id.isdigit()):
        return None
    if len(micros) > 17 or len(row_id) > 10:
        return None
    try:
        return Cursor(datetime.fromtimestamp(int(micros) / 1_000_000, timezone.utc), int(row_id))
    except (OverflowError, ValueError, OSError):
        return None


@dataclass(frozen=True)
class StuckFlow:
    """A flow whose consent is not done and that has not changed for a while."""

    flow_id: str
    reference_id: str | None
    consent_status: str | None
    lifecycle: str | None
    last_change_at: datetime | None
    open_incidents: int
    national_id_masked: str | None = None
    row_id: int = 0


@dataclass(frozen=True)
class IncidentGroup:
    """Open incidents of one task type and category, and on how many flows."""

    task_type: str | None
    task_category: str | None
    incidents: int
    flows: int
    oldest_at: datetime | None


@dataclass(frozen=True)
class OpenIncident:
    """One open incident with what staff need to act on its flow."""

    row_id: int
    flow_id: str
    incident_id: str
    task_type: str | None
    task_category: str | None
    message: str | None
    first_seen_at: datetime
    last_seen_at: datetime
    reference_id: str | None
    consent_status: str | None
    actions: tuple[str, ...]
    lifecycle: str | None = None
    archived: bool = False


@dataclass(frozen=True)
class IncidentFlow:
    """A flow with open incidents: how many, and since when the oldest is open."""

    flow_id: str
    reference_id: str | None
    national_id_masked: str | None
    consent_status: str | None
    lifecycle: str | None
    open_incidents: int
    oldest_at: datetime
    archived: bool = False
    row_id: int = 0  # the oldest open incident's row: with `oldest_at`, the flow's place in the list


@dataclass(frozen=True)
class Page:
    """One page of a work list; `next_cursor` None on the last one."""

    rows: list
    next_cursor: Cursor | None


def _limited(limit: int) -> int:
    return max(1, min(int(limit), MAX_LIMIT))


def _not_done():
    """The flows whose consent is not done; written as the partial index `ix_flow_index_not_done_change` is.

    Values are inlined (not bound) so that PostgreSQL and SQLite see the index's own condition, and no term
    is an `x OR x IS NULL` that SQLite would rather answer from the single-column indexes.
    """
    return and_(
        func.coalesce(FlowRecord.consent_status, _text("Unopened")).in_(_inline("open_consent", OPEN_CONSENT)),
        func.coalesce(FlowRecord.lifecycle, _text("")).not_in(_inline("finished", FINISHED_LIFECYCLES)),
        FlowRecord.archived.is_not(True),
        FlowRecord.gone_at.is_(None),
        FlowRecord.unknown_at.is_(None),
        FlowRecord.stub.is_(False),
    )


def _inline(name: str, values: tuple[str, ...]):
    return bindparam(name, list(values), expanding=True, literal_execute=True)


def _text(value: str):
    return literal(value, literal_execute=True)


def _open_counts(flow_ids: list[str]) -> dict[str, int]:
    """Open incidents per flow, for one page's flows (a subquery per row would run for every candidate row)."""
    if not flow_ids:
        return {}
    query = (
        select(FlowIncident.flow_id, func.count(FlowIncident.id))
        .where(FlowIncident.flow_id.in_(flow_ids), FlowIncident.resolved_at.is_(None))
        .group_by(FlowIncident.flow_id)
    )
    return dict(db.session.execute(query).all())


def _after(expression, column, cursor: Cursor | None):
    if cursor is None:
        return true()
    # A row comparison: both databases seek the (time, id) index to it instead of filtering every row before it.
    return tuple_(expression, column) > tuple_(literal(cursor.at, expression.type), literal(cursor.row_id))


def _page(rows: Sequence, limit: int, cursor_of) -> Page:
    shown = list(rows[:limit])
    return Page(shown, cursor_of(shown[-1]) if len(rows) > limit else None)


def stuck_page(now: datetime, stuck_after: timedelta, after: Cursor | None = None, limit: int = 100) -> Page:
    """One page of stuck flows (`StuckFlow`), oldest change first."""
    limit, last_change = _limited(limit), FlowRecord.last_change_at
    query = (
        select(FlowRecord)
        .where(_not_done(), last_change < now - stuck_after, _after(last_change, FlowRecord.id, after))
        .order_by(last_change, FlowRecord.id)
        .limit(limit + 1)
    )
    found = db.session.scalars(query).all()
    counts = _open_counts([record.flow_id for record in found])
    rows = [_stuck(record, counts.get(record.flow_id, 0)) for record in found]
    return _page(rows, limit, lambda row: Cursor(row.last_change_at, row.row_id))


def find_stuck(now: datetime, stuck_after: timedelta, limit: int = 100) -> list[StuckFlow]:
    """Flows stuck for longer than `stuck_after` at `now`, oldest change first."""
    return stuck_page(now, stuck_after, None, limit).rows


def open_flows_of(person_key: str, most: int = 5) -> list[FlowRecord]:
    """The person's flows whose consent is not done (as for stuck flows), newest first: what a new flow for them
    would stand beside."""
    query = (
        select(FlowRecord)
        .where(FlowRecord.national_id_hash == person_key, _not_done())
        .order_by(FlowRecord.created_at.desc(), FlowRecord.id.desc())
        .limit(most)
    )
    return list(db.session.scalars(query))


def count_stuck(now: datetime, stuck_after: timedelta, cap: int = COUNT_CAP) -> int:
    """How many flows are stuck, counted up to `cap` + 1 (more means "more than `cap`")."""
    stuck = select(FlowRecord.id).where(_not_done(), FlowRecord.last_change_at < now - stuck_after).limit(cap + 1)
    return db.session.scalar(select(func.count()).select_from(stuck.subquery())) or 0


def _stuck(record: FlowRecord, open_incidents: int) -> StuckFlow:
    return StuckFlow(
        flow_id=record.flow_id,
        reference_id=record.reference_id,
        consent_status=record.consent_status,
        lifecycle=record.lifecycle,
        last_change_at=record.last_change_at,
        open_incidents=open_incidents or 0,
        national_id_masked=record.national_id_masked,
        row_id=record.id,
    )


@overload
def _aware(moment: datetime) -> datetime: ...
@overload
def _aware(moment: None) -> None: ...
def _aware(moment: datetime | None) -> datetime | None:
    """An expression's value comes back without the column type: naive on SQLite, so UTC is said here."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=timezone.utc)


# -- incidents -----------------------------------------------------------------------------------


def _open():
    return FlowIncident.resolved_at.is_(None)


def open_incident_groups() -> list[IncidentGroup]:
    """Open incidents counted by task type and category, the largest group first."""
    count = func.count(FlowIncident.id)
    query = (
        select(
            FlowIncident.task_type,
            FlowIncident.task_category,
            count,
            func.count(FlowIncident.flow_id.distinct()),
            func.min(FlowIncident.first_seen_at),
        )
        .where(_open())
        .group_by(FlowIncident.task_type, FlowIncident.task_category)
        .order_by(count.desc(), FlowIncident.task_type, FlowIncident.task_category)
    )
    return [
        IncidentGroup(kind, category, n, flows, _aware(oldest))
        for kind, category, n, flows, oldest in db.session.execute(query)
    ]


def open_incidents(
    task_type: str | None = None,
    task_category: str | None = None,
    *,
    grouped: bool = False,
    after: Cursor | None = None,
    limit: int = 50,
) -> Page:
    """Open incidents (`OpenIncident`), oldest first; of one group when `grouped` (None matches a missing value)."""
    limit = _limited(limit)
    query = (
        select(
            FlowIncident,
            FlowRecord.reference_id,
            FlowRecord.consent_status,
            FlowRecord.actions,
            FlowRecord.lifecycle,
            FlowRecord.archived,
        )
        .outerjoin(FlowRecord, FlowRecord.flow_id == FlowIncident.flow_id)
        .where(_open(), _after(FlowIncident.first_seen_at, FlowIncident.id, after))
        .order_by(FlowIncident.first_seen_at, FlowIncident.id)
        .limit(limit + 1)
    )
    if grouped:
        query = query.where(
            _equals(FlowIncident.task_type, task_type), _equals(FlowIncident.task_category, task_category)
        )
    rows = [_open_incident(*row) for row in db.session.execute(query)]
    return _page(rows, limit, lambda row: Cursor(row.first_seen_at, row.row_id))


def _equals(column, value: str | None):
    return column.is_(None) if value is None else column == value


def _open_incident(incident: FlowIncident, reference_id, consent_status, actions, lifecycle, archived) -> OpenIncident:
    return OpenIncident(
        row_id=incident.id,
        flow_id=incident.flow_id,
        incident_id=incident.incident_id,
        task_type=incident.task_type,
        task_category=incident.task_category,
        message=incident.message,
        first_seen_at=incident.first_seen_at,
        last_seen_at=incident.last_seen_at,
        reference_id=reference_id,
        consent_status=consent_status,
        actions=split_actions(actions),
        lifecycle=lifecycle,
        archived=archived is True,
    )


def split_actions(actions: str | None) -> tuple[str, ...]:
    return tuple(name for name in (actions or "").split(ACTION_SEPARATOR) if name)


def flows_with_open_incidents(after: Cursor | None = None, limit: int = 50) -> Page:
    """Flows with at least one open incident (`IncidentFlow`), the longest open first.

    The page is found among the open incidents alone (few), then its flows are read by their ids.
    """
    limit = _limited(limit)
    oldest, first_row = func.min(FlowIncident.first_seen_at), func.min(FlowIncident.id)
    query = (
        select(FlowIncident.flow_id, func.count(FlowIncident.id), oldest, first_row)
        .where(_open())
        .group_by(FlowIncident.flow_id)
        .order_by(oldest, first_row)
        .limit(limit + 1)
    )
    if after is not None:
        query = query.having(or_(oldest > after.at, and_(oldest == after.at, first_row > after.row_id)))
    found = db.session.execute(query).all()
    records = _records([flow_id for flow_id, *_ in found])
    rows = [
        _incident_flow(flow_id, records.get(flow_id), count, oldest_at, first_row)
        for flow_id, count, oldest_at, first_row in found
    ]
    return _page(rows, limit, lambda row: Cursor(row.oldest_at, row.row_id))


def _records(flow_ids: list[str]) -> dict[str, FlowRecord]:
    if not flow_ids:
        return {}
    return {
        record.flow_id: record
        for record in db.session.scalars(select(FlowRecord).where(FlowRecord.flow_id.in_(flow_ids)))
    }


def _incident_flow(flow_id: str, record: FlowRecord | None, count: int, oldest_at, first_row: int) -> IncidentFlow:
    return IncidentFlow(
        flow_id=flow_id,
        reference_id=record.reference_id if record else None,
        national_id_masked=record.national_id_masked if record else None,
        consent_status=record.consent_status if record else None,
        lifecycle=record.lifecycle if record else None,
        open_incidents=count,
        oldest_at=_aware(oldest_at),
        row_id=first_row,
        archived=bool(record and record.archived),
    )


def count_flows_with_open_incidents() -> int:
    return db.session.scalar(select(func.count(FlowIncident.flow_id.distinct())).where(_open())) or 0
