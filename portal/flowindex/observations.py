"""What one source saw of one flow, in the index's terms: an `Observation`.

Each source knows part of a flow: a list item its consent status, the retrieve response its
lifecycle, version and last name, a webhook event a status change. An observation carries what its
source knew and leaves the rest None.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..flowapi.records import (
    CONSENT_STATUSES,
    LIFECYCLES,
    CreatedFlow,
    FlowDetail,
    FlowSummary,
    known_spelling,
    parse_timestamp,
    read_flag,
)
from .incidents import IncidentReport, detail_incidents, event_incidents

CREATE, LIST, DETAIL, WEBHOOK, SYNC = "create", "list", "detail", "webhook", "sync"
SYNC_DETAIL = "sync_detail"  # a flow's retrieve answer fetched by `flows sync --details`, not on its page
DETAILS = (DETAIL, SYNC_DETAIL)
MAX_TEXT = 100
MAX_ACTIONS = 255
STORABLE_INTEGERS = range(-(2**31), 2**31)  # what an Integer column holds on PostgreSQL as on SQLite


@dataclass(frozen=True)
class Observation:
    flow_id: str
    source: str
    seen_at: datetime  # when the portal saw it
    # When what it says was known true: when it was fetched (a fetched state holds until then), or the
    # event's time for a webhook (a late delivery tells an old state).
    state_at: datetime
    version: int | None = None
    reference_id: str | None = None
    flow_number: int | None = None
    consent_status: str | None = None
    lifecycle: str | None = None
    archived: bool | None = None
    has_incidents: bool | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    national_id: str | None = None
    country: str | None = None
    last_name: str | None = None
    created_by: str | None = None
    actions: str | None = None  # the retrieve response's actions, comma-separated
    incidents: IncidentReport | None = None

    @property
    def listed(self) -> bool:
        """The service listed this flow just now (so it still has it)."""
        return self.source in (LIST, SYNC)


def _short(value: Any) -> str | None:
    return value.strip()[:MAX_TEXT] or None if isinstance(value, str) else None


def from_summary(item: FlowSummary, archived: bool | None, seen_at: datetime, source: str = LIST) -> Observation | None:
    """A list item, from a page of current (archived=False) or archived flows, or of a list whose filter is in doubt
    (None: archived only when the item says so)."""
    if not item.id:
        return None
    raw = item.raw
    said_archived = read_flag(raw.get("archived"))
    updated_at = parse_timestamp(raw.get("updatedAt"))
    return Observation(
        flow_id=item.id,
        source=source,
        seen_at=seen_at,
        state_at=seen_at,
        version=_integer(raw.get("version")),
        reference_id=_short(item.reference_id),
        consent_status=_short(item.status),
        lifecycle=_short(raw.get("flowStatus")),
        archived=archived if said_archived is None else said_archived,
        created_at=item.created_at,
        updated_at=updated_at,
        national_id=item.national_id,
        last_name=_short(raw.get("lastName")),
    )


def from_detail(flow: FlowDetail, seen_at: datetime, source: str = DETAIL) -> Observation:
    """The retrieve response: lifecycle, version and the flow's data, but no consent status."""
    return Observation(
        flow_id=flow.flow_id,
        source=source,
        seen_at=seen_at,
        state_at=seen_at,
        version=_storable(flow.version),
        reference_id=_short(flow.reference_id),
        flow_number=_storable(flow.flow_number),
        lifecycle=_short(flow.status),
        archived=True if flow.status == "cancelled" else None,  # DESIGN: a cancelled flow is archived
        has_incidents=flow.has_incidents if flow.has_incidents is not None else (bool(flow.incidents) or None),
        created_at=flow.created_at,
        updated_at=flow.updated_at,
        national_id=flow.data.national_id,
        last_name=_short(flow.data.last_name),
        actions=_actions(flow.actions),
        incidents=detail_incidents(flow),
    )


def from_created(
    created: CreatedFlow, national_id: str, country: str, last_name: str, username: str, seen_at: datetime
) -> Observation | None:
    """A flow created through the portal: new, so Unopened and active (DESIGN §3)."""
    if not created.flow_id:
        return None
    return Observation(
        flow_id=created.flow_id,
        source=CREATE,
        seen_at=seen_at,
        state_at=seen_at,
        reference_id=_short(created.reference_id),
        consent_status="Unopened",
        lifecycle="active",
        archived=False,
        created_at=seen_at,
        national_id=national_id,
        country=country,
        last_name=_short(last_name),
        created_by=username,
    )


def from_event(
    flow_id: str | None,
    event_type: str | None,
    status: str | None,
    occurred_at: datetime | None,
    reference_id: str | None,
    payload: dict,
    received_at: datetime,
) -> Observation | None:
    """A stored webhook event; `flowStatus`, `archived` and `version` are read from `data` or the top level."""
    if not flow_id:
        return None
    field = event_field(payload)
    incident = event_type == "flow.incident" or None
    consent, lifecycle = _consent_or_lifecycle(status, _event_lifecycle(field))
    return Observation(
        flow_id=flow_id,
        source=WEBHOOK,
        seen_at=received_at,
        # No event happened after it arrived: a sender's clock running ahead (or a time in 2099) would otherwise
        # make its word outweigh everything the service says later, and hide every gap after it.
        state_at=min(occurred_at, received_at) if occurred_at else received_at,
        version=_integer(field("version")),
        reference_id=_short(reference_id),
        consent_status=_short(consent) if event_type != "flow.incident" else None,
        lifecycle=lifecycle,
        archived=read_flag(field("archived")),
        has_incidents=incident,
        incidents=event_incidents(event_type, payload),
    )


def _consent_or_lifecycle(status: str | None, lifecycle: str | None) -> tuple[str | None, str | None]:
    """An event's status as the consent status, unless it is a lifecycle ("completed"): a service that sends the
    retrieve answer's flow object as `data` puts the flow's own status where the consent status goes."""
    consent = known_spelling(status, CONSENT_STATUSES)
    if consent in CONSENT_STATUSES:
        return consent, lifecycle
    as_lifecycle = known_spelling(consent, LIFECYCLES)
    if as_lifecycle in LIFECYCLES:
        return None, lifecycle or as_lifecycle
    return consent, lifecycle


def event_field(payload: Any) -> Callable[[str], Any]:
    """Reads a field of a webhook event from its `data`, else from the top level (services put them either way)."""
    payload = payload if isinstance(payload, dict) else {}
    data = payload.get("data")
    data = data if isinstance(data, dict) else {}
    return lambda name: data.get(name, payload.get(name))


def lifecycle_told(payload: Any) -> tuple[str | None, bool]:
    """What a webhook event says of the flow's lifecycle beside its consent status: its `flowStatus` when that is not
    `active` (a cancellation, a completion), and whether it says the flow is archived."""
    field = event_field(payload)
    lifecycle = _event_lifecycle(field)
    return (lifecycle if lifecycle != "active" else None), read_flag(field("archived")) is True


def _event_lifecycle(field: Callable[[str], Any]) -> str | None:
    told = field("flowStatus")
    return _short(known_spelling(told, LIFECYCLES) if isinstance(told, str) else told)


def _actions(actions: list[str]) -> str:
    """The actions as one comma-separated text that fits its column (whole names only)."""
    names = [name for name in (action.strip().replace(",", " ")[:40] for action in actions) if name]
    while len(",".join(names)) > MAX_ACTIONS:
        names.pop()
    return ",".join(names)


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return _storable(value)
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) < 19:
        return _storable(int(value))
    return None


def _storable(value: int | None) -> int | None:
    """The number when an Integer column holds it on every database, else None (the service's number is not lost:
    the flow's page still shows it)."""
    return value if isinstance(value, int) and value in STORABLE_INTEGERS else None
