"""What is worth a notice: a flow got an incident, or has been stuck (the worklists decide which)."""

from datetime import datetime, timedelta

from sqlalchemy import and_, exists, func, or_, select

from ..extensions import db
from ..models import FlowIncident, FlowRecord, Notification
from .outbox import Notice, configured_channels, flow_url, queue_notices

SCAN_LIMIT = 500  # happenings looked at per pass; the next pass takes the rest
# Past this many incident notices on one flow within the window, further incidents of that flow are recorded as
# told but held back: a flood (a broken sender, or someone with the webhook secret) cannot flood the receivers.
INCIDENT_NOTICES_PER_FLOW = 10
FLOOD_WINDOW = timedelta(hours=1)


def incident_key(flow_id: str, incident_id: str) -> str:
    return f"incident:{flow_id}:{incident_id}"


def stuck_key(flow_id: str, last_change_at: datetime) -> str:
    """A flow stuck again after a change is a new happening, told again."""
    return f"stuck:{flow_id}:{last_change_at.isoformat()}"


def scan_incidents(settings, now: datetime, limit: int = SCAN_LIMIT) -> int:
    """Queue a notice for each open incident some configured channel has not been told of; rows queued."""
    channels = configured_channels(settings)
    if not channels:
        return 0
    key = "incident:" + FlowIncident.flow_id + ":" + FlowIncident.incident_id
    untold = or_(
        *(~exists().where(Notification.channel == channel, Notification.dedupe_key == key) for channel in channels)
    )
    query = (
        select(FlowIncident, FlowRecord.reference_id)
        .outerjoin(FlowRecord, FlowRecord.flow_id == FlowIncident.flow_id)
        .where(and_(FlowIncident.resolved_at.is_(None), untold))
        .order_by(FlowIncident.first_seen_at, FlowIncident.id)
        .limit(limit)
    )
    found = list(db.session.execute(query))
    told = _incident_notices_lately(now, {incident.flow_id for incident, _ in found})
    notices = []
    for incident, reference in found:
        told[incident.flow_id] = told.get(incident.flow_id, 0) + 1
        held_back = told[incident.flow_id] > INCIDENT_NOTICES_PER_FLOW
        notices.append(_incident_notice(settings, incident, reference, held_back))
    return queue_notices(settings, notices, now)


def _incident_notices_lately(now: datetime, flow_ids: set[str]) -> dict[str, int]:
    """Incident notices queued per flow within the flood window, counted once whatever the channels."""
    if not flow_ids:
        return {}
    query = (
        select(Notification.flow_id, func.count(func.distinct(Notification.dedupe_key)))
        .where(
            Notification.kind == "incident",
            Notification.flow_id.in_(flow_ids),
            Notification.created_at > now - FLOOD_WINDOW,
        )
        .group_by(Notification.flow_id)
    )
    # flow_id is one of flow_ids, never None
    return {flow_id: count for flow_id, count in db.session.execute(query) if flow_id is not None}


def _incident_notice(settings, incident: FlowIncident, reference_id: str | None, held_back: bool) -> Notice:
    what = " / ".join(filter(None, (incident.task_type, incident.task_category))) or "incident"
    data = {
        "flowId": incident.flow_id,
        "referenceId": reference_id,
        "flowUrl": flow_url(settings, incident.flow_id),
        "incident": {
            "id": incident.incident_id,
            "taskType": incident.task_type,
            "taskCategory": incident.task_category,
            "message": incident.message,
            "firstSeenAt": incident.first_seen_at.isoformat(),
        },
    }
    subject = f"Flow {reference_id or incident.flow_id}: {what}"
    key = incident_key(incident.flow_id, incident.incident_id)
    return Notice("incident", key, incident.flow_id, subject, data, held_back=held_back)


def scan_stuck(settings, now: datetime, limit: int = SCAN_LIMIT) -> int:
    """Queue a notice for each flow without change for PORTAL_STUCK_AFTER_HOURS, once per change; rows queued."""
    if not configured_channels(settings):
        return 0
    from ..worklists import find_stuck  # owned by the worklists; imported late so the incident half stands alone

    stuck_after = timedelta(hours=settings.stuck_after_hours)
    notices = (
        _stuck_notice(settings, now, flow, stuck_after)
        for flow in find_stuck(now, stuck_after=stuck_after, limit=limit)
        if flow.last_change_at and flow.last_change_at <= now - stuck_after  # open incidents alone: told as incidents
    )
    return queue_notices(settings, notices, now)


def _stuck_notice(settings, now: datetime, flow, stuck_after: timedelta) -> Notice:
    hours = int((now - flow.last_change_at).total_seconds() // 3600)
    data = {
        "flowId": flow.flow_id,
        "referenceId": flow.reference_id,
        "flowUrl": flow_url(settings, flow.flow_id),
        "consentStatus": flow.consent_status,
        "lifecycle": flow.lifecycle,
        "lastChangeAt": flow.last_change_at.isoformat(),
        "hoursWithoutChange": hours,
        "stuckAfterHours": int(stuck_after.total_seconds() // 3600),
        "openIncidents": flow.open_incidents,
    }
    subject = f"Flow {flow.reference_id or flow.flow_id}: no change for {hours} hours"
    key = stuck_key(flow.flow_id, flow.last_change_at)
    return Notice("stuck", key, flow.flow_id, subject, data)


def scan(settings, now: datetime, stuck: bool = True) -> int:
    """Queue notices for new incidents and (unless `stuck` is False) stuck flows; commit; rows queued."""
    queued = scan_incidents(settings, now)
    if stuck:
        queued += scan_stuck(settings, now)
    db.session.commit()
    return queued
