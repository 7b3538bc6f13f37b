"""One status for a flow on every page: consent status, lifecycle and archived, each from its freshest source.

No one source tells all three. A list item says the consent status (and, by its tab, whether the
flow is archived), the retrieve response the lifecycle, webhook events any of them as they change,
and the index keeps the newest of what each said. A page hands over what it fetched just now; this
module weighs it against the index and the flow's events with the index's own rule (a newer version
wins, else the later time) and says, for each part, which source it came from and when that was true.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import bindparam, func, select

from ..extensions import db
from ..flowapi import FlowDetail, FlowPage, FlowSummary
from ..models import FlowRecord, WebhookEvent
from ..webhooks.store import event_document
from .observations import Observation, from_detail, from_event, from_summary
from .writer import utc_now


@dataclass(frozen=True)
class Reading:
    """One part of a flow's state as one source told it: the value, the source and when it was true."""

    value: Any = None
    source: str | None = None  # create, list, detail, webhook, sync
    at: datetime | None = None
    version: int | None = None

    @property
    def known(self) -> bool:
        return self.value is not None


@dataclass(frozen=True)
class FlowStatus:
    consent: Reading  # Unopened, Opened, Accepted, Rejected
    lifecycle: Reading  # active, completed, cancelled
    archived: Reading  # True or False
    now: datetime  # when it was weighed: the reference for "2 minutes ago"

    @property
    def awaiting_consent(self) -> bool:
        """The individual has not answered yet and still can: consent open (or not known) on a flow neither ended
        nor archived (an archived flow is put away, whatever its lifecycle says)."""
        return (
            self.consent.value in (None, "Unopened", "Opened")
            and self.lifecycle.value not in ("completed", "cancelled")
            and self.archived.value is not True
        )

    @property
    def answered_but_not_seen(self) -> bool:
        """Completed while the portal last saw the consent open: the individual answered; how is not seen yet."""
        return self.lifecycle.value == "completed" and self.consent.value in (None, "Unopened", "Opened")

    @property
    def cancelled_before_consent(self) -> bool:
        """Cancelled while the individual had not answered: the consent status stays where it stopped."""
        return self.lifecycle.value == "cancelled" and self.consent.value in (None, "Unopened", "Opened")


def consent_since(status: FlowStatus, record: FlowRecord | None, created_at: datetime | None) -> datetime | None:
    """When the consent status became what it is, as far as the portal knows: the decision's or the opening's
    earliest known time from the index, the flow's creation for Unopened; None when not known."""
    if status.consent.value in ("Accepted", "Rejected"):
        return record.decided_at if record else None
    if status.consent.value == "Opened":
        return record.opened_at if record else None
    if status.consent.value == "Unopened":
        return created_at
    return None


def freshest(*readings: Reading) -> Reading:
    """The reading to believe: by version when both carry one, else by time; earlier arguments win ties."""
    best = Reading()
    for reading in readings:
        if reading.known and (not best.known or _newer(reading, best)):
            best = reading
    return best


def _newer(reading: Reading, than: Reading) -> bool:
    if reading.version is not None and than.version is not None and reading.version != than.version:
        return reading.version > than.version
    return reading.at is not None and (than.at is None or reading.at > than.at)


def _readings(observation: Observation | None) -> tuple[Reading, Reading, Reading]:
    if observation is None:
        return Reading(), Reading(), Reading()
    at, source, version = observation.state_at, observation.source, observation.version
    return (
        Reading(observation.consent_status, source, at, version),
        Reading(observation.lifecycle, source, at, version),
        Reading(observation.archived, source, at, version),
    )


# What `_indexed` reads of an index record.
STATUS_COLUMNS = (
    FlowRecord.consent_status,
    FlowRecord.status_source,
    FlowRecord.status_at,
    FlowRecord.lifecycle,
    FlowRecord.lifecycle_source,
    FlowRecord.lifecycle_at,
    FlowRecord.archived,
    FlowRecord.archived_source,
    FlowRecord.archived_at,
)


class StatusColumns(Protocol):
    """What the index says of a flow's status: a FlowRecord, or a row of STATUS_COLUMNS."""

    @property
    def consent_status(self) -> str | None: ...
    @property
    def status_source(self) -> str | None: ...
    @property
    def status_at(self) -> datetime | None: ...
    @property
    def lifecycle(self) -> str | None: ...
    @property
    def lifecycle_source(self) -> str | None: ...
    @property
    def lifecycle_at(self) -> datetime | None: ...
    @property
    def archived(self) -> bool | None: ...
    @property
    def archived_source(self) -> str | None: ...
    @property
    def archived_at(self) -> datetime | None: ...


def _indexed(record: StatusColumns | None) -> tuple[Reading, Reading, Reading]:
    """The index's three readings of a flow; `record` may be a row of STATUS_COLUMNS."""
    if record is None:
        return Reading(), Reading(), Reading()
    return (
        Reading(record.consent_status, record.status_source, record.status_at),
        Reading(record.lifecycle, record.lifecycle_source, record.lifecycle_at),
        Reading(record.archived, record.archived_source, record.archived_at),
    )


def _weigh(sources: Iterable[tuple[Reading, Reading, Reading]], now: datetime) -> FlowStatus:
    consent, lifecycle, archived = zip(*sources, strict=True)
    return FlowStatus(freshest(*consent), freshest(*lifecycle), freshest(*archived), now)


def status_of_record(record: FlowRecord | None) -> FlowStatus:
    """What the index knows (a search result, an export)."""
    return _weigh([_indexed(record)], utc_now())


def status_of_detail(flow: FlowDetail, record: FlowRecord | None, events: list[WebhookEvent]) -> FlowStatus:
    """The flow's page: the retrieve response just fetched, its timeline's events and the index."""
    now = utc_now()
    from_events = [_readings(_observed(flow.flow_id, event)) for event in events]
    return _weigh([_readings(from_detail(flow, now)), *from_events, _indexed(record)], now)


def status_of_item(
    item: FlowSummary, archived: bool | None, record: StatusColumns | None, now: datetime | None = None
) -> FlowStatus:
    """A row of the live list: the list item just fetched (from the current or archived tab) and the index."""
    now = now or utc_now()
    return _weigh([_readings(from_summary(item, archived, now)), _indexed(record)], now)


# The status columns only, as plain rows, built once: a whole index record (or the ORM's execution path and a
# statement built anew for every page) costs more than the query itself.
PAGE_STATUSES = select(FlowRecord.flow_id, *STATUS_COLUMNS).where(
    FlowRecord.flow_id.in_(bindparam("ids", expanding=True))
)


def archived_list_in_doubt(page: FlowPage, listed_since: datetime, least: int = 1) -> bool:
    """Whether a page of the archived list holds flows the index has as current and listed since `listed_since`,
    half of it or more and at least `least`: a service that does not filter by archived. (A flow archived since it
    was listed is met there too: hence the shares, and a sync asks only about its own current walk.)"""
    ids = [item.id for item in page.items if item.id]
    if len(ids) < least:
        return False
    current = select(func.count()).where(
        FlowRecord.flow_id.in_(ids), FlowRecord.archived.is_(False), FlowRecord.listed_at >= listed_since
    )
    return mostly_current(db.session.scalar(current) or 0, len(page.items), least)


def mostly_current(current: int, shown: int, least: int) -> bool:
    """The archived tab's doubt: `current` of its `shown` flows known current, at least `least` and half of them."""
    return current >= least and current * 2 >= shown


def current_listed_since(since: datetime) -> bool:
    """Whether the index holds a flow the current list showed since `since` (else a check against it says nothing)."""
    listed = select(FlowRecord.id).where(FlowRecord.archived.is_(False), FlowRecord.listed_at >= since).limit(1)
    return db.session.scalar(listed) is not None


def statuses_of_page(page: FlowPage, archived: bool | None) -> dict[str, FlowStatus]:
    """Each row of a live list page by flow id, with the page's index rows read in one query."""
    ids = [item.id for item in page.items if item.id]
    records = {}
    if ids:
        records = {row.flow_id: row for row in db.session.connection().execute(PAGE_STATUSES, {"ids": ids})}
    now = utc_now()  # one moment for the page: its rows were listed together
    return {item.id: status_of_item(item, archived, records.get(item.id), now) for item in page.items if item.id}


def _observed(flow_id: str, event: WebhookEvent) -> Observation | None:
    """A stored event as the index saw it (an event linked by its reference, too, under the flow's id)."""
    document = event_document(event)
    payload = document if isinstance(document, dict) else {}
    occurred_at, received_at = event.occurred_at, event.received_at
    return from_event(flow_id, event.event_type, event.status, occurred_at, event.reference_id, payload, received_at)
