"""Incidents the service reported on flows, kept in `flow_incidents`: open while the service lists them.

Two sources tell of incidents. A retrieve response lists every open incident of its flow (a complete
report): one it no longer lists is resolved, one that comes back is reopened. A `flow.incident` webhook
event tells of one new incident and nothing of the others. Messages are masked before they are stored.
Written by the index writer in the same transaction as the observation that carried them.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from ..extensions import db
from ..flowapi.records import FlowDetail, Incident
from ..flowapi.text import redact
from ..models import FlowIncident
from ..webhooks.store import clean_text

MAX_ID, MAX_TASK, MAX_MESSAGE = 255, 100, 1000
INCIDENT_EVENT = "flow.incident"


@dataclass(frozen=True)
class SeenIncident:
    """One incident as a source told it, its message already masked."""

    incident_id: str
    task_type: str | None
    task_category: str | None
    message: str | None


@dataclass(frozen=True)
class IncidentReport:
    """The incidents one source told of a flow; `complete` when it lists every open one (a retrieve)."""

    incidents: tuple[SeenIncident, ...]
    complete: bool


def detail_incidents(flow: FlowDetail) -> IncidentReport:
    """The retrieve response's incidents; not complete when it says it has some but lists none readable."""
    body = flow.raw.get("flow")
    body = body if isinstance(body, dict) else flow.raw
    incidents = read_seen_incidents(body.get("incidents"))
    return IncidentReport(incidents, complete=bool(incidents) or not flow.has_incidents)


def event_incidents(event_type: str | None, payload: dict) -> IncidentReport | None:
    """The incident a `flow.incident` event carries in `data.incident` (or at the top level); else None."""
    if event_type != INCIDENT_EVENT:
        return None
    data = payload.get("data")
    data = data if isinstance(data, dict) else {}
    value = data.get("incident", data.get("incidents", payload.get("incident")))
    incidents = read_seen_incidents(value)
    return IncidentReport(incidents, complete=False) if incidents else None


def read_seen_incidents(value: Any) -> tuple[SeenIncident, ...]:
    """One record, a list of them, or records keyed by id (spec §2.5); odd entries read as far as they go."""
    entries: list[tuple[str | None, Any]]
    if isinstance(value, list):
        entries = [(None, item) for item in value]
    elif isinstance(value, dict) and _single_record(value):
        entries = [(None, value)]
    elif isinstance(value, dict):
        entries = [(str(key), item) for key, item in value.items()]
    else:
        return ()
    seen: dict[str, SeenIncident] = {}
    for key, item in entries:
        incident = _seen(Incident.from_json(key or "", item))
        if incident:
            seen.setdefault(incident.incident_id, incident)
    return tuple(seen.values())


def _single_record(value: dict) -> bool:
    return any(isinstance(value.get(name), str) for name in ("id", "message", "taskType", "taskCategory"))


def _seen(incident: Incident) -> SeenIncident | None:
    message = _masked(incident.message, MAX_MESSAGE)
    task_type, task_category = _masked(incident.task_type, MAX_TASK), _masked(incident.task_category, MAX_TASK)
    if not (incident.id or message or task_type):
        return None
    # Without an id (a list of bare records), what it says is its identity: a position would shift.
    incident_id = clean_text(incident.id, MAX_ID) or _content_id(task_type, task_category, message)
    return SeenIncident(incident_id, task_type, task_category, message)


def _masked(text: str | None, most: int) -> str | None:
    return clean_text(redact(" ".join(text.split())), most) if isinstance(text, str) else None


def _content_id(*parts: str | None) -> str:
    return "content-" + hashlib.sha256("\x1f".join(part or "" for part in parts).encode()).hexdigest()[:32]


def record_incidents(observations: Iterable) -> list[tuple[str, str]]:
    """Upsert the incidents observations carry, resolve those a complete report no longer lists, reopen
    those it lists again; returns (flow id, incident id) of incidents new or reopened. The caller commits."""
    reports = sorted(
        (
            (item.flow_id, item.incidents, item.state_at, item.source)
            for item in observations
            if item.incidents is not None
        ),
        key=lambda report: report[2],
    )
    if not reports:
        return []
    flow_ids = sorted({report[0] for report in reports})
    query = select(FlowIncident).where(FlowIncident.flow_id.in_(flow_ids))
    known = {(row.flow_id, row.incident_id): row for row in db.session.scalars(query)}
    opened: list[tuple[str, str]] = []
    for flow_id, report, at, source in reports:
        for seen in report.incidents:
            if _keep(known, flow_id, seen, at, source):
                opened.append((flow_id, seen.incident_id))
        if report.complete:
            listed = {seen.incident_id for seen in report.incidents}
            _resolve(
                (row for key, row in known.items() if key[0] == flow_id and key[1] not in listed),
                at,
            )
    db.session.flush()
    return opened


def _keep(known: dict, flow_id: str, seen: SeenIncident, at: datetime, source: str) -> bool:
    """Store or refresh one incident; True when it is new, or open again after it was resolved."""
    row = known.get((flow_id, seen.incident_id))
    if row is None:
        row = known[(flow_id, seen.incident_id)] = FlowIncident(
            flow_id=flow_id, incident_id=seen.incident_id, source=source, first_seen_at=at, last_seen_at=at
        )
        db.session.add(row)
        _describe(row, seen)
        return True
    row.first_seen_at = min(row.first_seen_at, at)
    if at >= row.last_seen_at:
        row.last_seen_at, row.source = at, source
        _describe(row, seen)
    if row.resolved_at is not None and at > row.resolved_at:
        row.resolved_at = None  # a report newer than the resolution lists it again
        return True
    return False


def _describe(row: FlowIncident, seen: SeenIncident) -> None:
    row.task_type = seen.task_type or row.task_type
    row.task_category = seen.task_category or row.task_category
    row.message = seen.message or row.message


def _resolve(rows: Iterable[FlowIncident], at: datetime) -> None:
    """Resolved at `at`: open incidents last seen before the complete report that left them out."""
    for row in rows:
        if row.resolved_at is None and row.last_seen_at < at:
            row.resolved_at = at
