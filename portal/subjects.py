"""Subject requests: everything the portal stores about one person, to hand over (access) or to erase.

A person is found by their subject key, the keyed hash of their national id (PORTAL_INDEX_KEY): their
rows in the flow index, then what hangs off those flows (webhook events, incidents, notifications, create
submissions, audit entries naming the flow) and what names the person directly (events whose body carries their id,
their access log). Erasure removes those records except the kinds a legal hold keeps
(PORTAL_LEGAL_HOLD); it is audited under a short prefix of the subject key, never the id.
"""

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import date, datetime

from flask_babel import lazy_gettext as _l
from sqlalchemy import delete, or_, select, update

from .access_log import subject_key_of_number, subject_keys_of_event
from .audit import record_audit
from .database import changed_rows
from .extensions import db
from .flowindex.keys import NationalId, read_national_id
from .insight_rollups import mark_flows
from .masking import mask_document
from .models import (
    AccessEntry,
    AuditEntry,
    CreateSubmission,
    FlowIncident,
    FlowRecord,
    Notification,
    NotificationAttempt,
    WebhookEvent,
    utc_now,
)
from .settings import SUBJECT_RECORD_KINDS as KINDS  # the kinds a legal hold may name

EVENT_SCAN_BATCH = 2000
AUDIT_FLOWS_A_QUERY = 200
_NOT_DIGITS = bytes(sorted(set(range(256)) - set(b"0123456789")))  # for bytes.translate: ten times a regex's speed
# The portal's erasure ends at its own records: the flows stay in the Flow Service, whose pages show the person.
SERVICE_KEEPS_FLOWS = _l(
    "The Flow Service keeps its own records of this person's flows: the portal shows them from the service for as "
    "long as it lists them, but does not index them under the person again. Erasing them there is a request to the "
    "service's operator."
)


@dataclass
class SubjectRecords:
    """One person's stored records, by kind."""

    subject_key: str
    flows: list[FlowRecord] = field(default_factory=list)
    events: list[WebhookEvent] = field(default_factory=list)
    incidents: list[FlowIncident] = field(default_factory=list)
    notifications: list[Notification] = field(default_factory=list)
    create_submissions: list[CreateSubmission] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    access_log: list[AccessEntry] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {kind: len(getattr(self, kind)) for kind in KINDS}


def find_subject(national_id: str, country: str | None = None) -> SubjectRecords | None:
    """Every locally stored record about the person with `national_id` (of `country`, for a number valid in more
    than one); None when it is no valid id."""
    number = read_national_id(national_id, country)
    if number is None:
        return None
    subject_key = subject_key_of_number(number)
    found = SubjectRecords(subject_key)
    found.flows = list(db.session.scalars(select(FlowRecord).where(FlowRecord.national_id_hash == subject_key)))
    flow_ids = [record.flow_id for record in found.flows]
    found.events = _events_of(number, subject_key, flow_ids)
    found.incidents = _rows_of_flows(FlowIncident, flow_ids)
    found.notifications = _rows_of_flows(Notification, flow_ids)
    found.create_submissions = _rows_of_flows(CreateSubmission, flow_ids)
    references = sorted({record.reference_id for record in found.flows if record.reference_id})
    found.audit = _audit_entries(subject_key, flow_ids, references, number.birth_digits)
    found.access_log = list(db.session.scalars(select(AccessEntry).where(AccessEntry.subject_key == subject_key)))
    return found


def export_document(found: SubjectRecords) -> dict:
    """The access request's answer: one JSON document of every record, as stored, but for national ids: a record may
    name other people beside this one (a co-applicant in an event's body, its reference or its flow id), so every
    national id in it is masked, as the pages show them."""
    records = {
        "flows": [_row(record, exclude=("national_id_hash",)) for record in found.flows],
        "events": [_row(event) | {"body": _json_or_text(event.body)} for event in found.events],
        "incidents": [_row(incident) for incident in found.incidents],
        "notifications": [_row(notice) | {"payload": _json_or_text(notice.payload)} for notice in found.notifications],
        "create_submissions": [_row(row, exclude=("token",)) for row in found.create_submissions],
        "audit": [_row(entry) for entry in found.audit],
        "access_log": [_row(entry, exclude=("subject_key",)) for entry in found.access_log],
    }
    return {
        "generated_at": _iso(utc_now()),
        "subject_key": found.subject_key,
        "counts": found.counts(),
        **{kind: mask_document(rows) for kind, rows in records.items()},
    }


def erase(found: SubjectRecords, held: tuple[str, ...], actor: str) -> dict[str, int]:
    """Remove the person's records except the kinds in `held`; audited without the id. Removed counts by kind."""
    removed = {}
    for kind, model in (
        ("flows", FlowRecord),
        ("events", WebhookEvent),
        ("incidents", FlowIncident),
        ("notifications", Notification),
        ("create_submissions", CreateSubmission),
        ("audit", AuditEntry),
        ("access_log", AccessEntry),
    ):
        rows = getattr(found, kind)
        if kind in held or not rows:
            removed[kind] = 0
            continue
        if model is FlowRecord:
            mark_flows(FlowRecord.id.in_([row.id for row in rows]))  # their insight rollups are summed again
            removed[kind] = _erase_person_from_flows([row.id for row in rows])
            continue
        if model is Notification:  # SQLite keeps foreign keys unenforced: no cascade to rely on
            db.session.execute(
                delete(NotificationAttempt).where(NotificationAttempt.notification_id.in_([row.id for row in rows]))
            )
        removed[kind] = changed_rows(delete(model).where(model.id.in_([row.id for row in rows])))
    summary = ", ".join(f"{kind} {count}" for kind, count in removed.items())
    record_audit(actor, "subject_erase", f"subject {found.subject_key[:12]}: {summary}", commit=False)
    db.session.commit()
    return removed


# The index columns that say who a flow is for.
PERSON_COLUMNS = ("national_id_hash", "national_id_masked", "birth_date", "last_name", "last_name_key")


def _erase_person_from_flows(row_ids: list[int]) -> int:
    """The flows stay in the index without the person, marked erased: deleted, the next list or page of the flow
    indexed them again with the person, and with its events erased it read as a flow whose webhooks never came."""
    erased = update(FlowRecord).where(FlowRecord.id.in_(row_ids))
    return changed_rows(erased.values({**dict.fromkeys(PERSON_COLUMNS), "erased_at": utc_now()}))


def _events_of(number: NationalId, subject_key: str, flow_ids: list[str]) -> list[WebhookEvent]:
    """Events of the person's flows, and any other event whose body names the person."""
    chosen = set(_events_naming(number, subject_key))
    for some in _chunks(flow_ids):
        chosen.update(db.session.scalars(select(WebhookEvent.id).where(WebhookEvent.flow_id.in_(some))))
    events: list[WebhookEvent] = []
    for some in _chunks(sorted(chosen)):
        events += db.session.scalars(select(WebhookEvent).where(WebhookEvent.id.in_(some)).order_by(WebhookEvent.id))
    return events


def _events_naming(number: NationalId, subject_key: str) -> Iterator[int]:
    """The ids of the events whose body names the person, whichever flow they are of. Every body is read, in
    batches of plain rows; only one whose digits hold the person's (`NationalId.digit_runs`) is read for ids."""
    runs, last_id = number.digit_runs, 0
    while True:
        query = select(WebhookEvent.id, WebhookEvent.body).where(WebhookEvent.id > last_id).order_by(WebhookEvent.id)
        # Plain rows from the connection, not through the ORM's loading: a third of the time.
        batch = db.session.connection().execute(query.limit(EVENT_SCAN_BATCH)).all()
        for event_id, body in batch:
            if _may_name(body, runs) and subject_key in subject_keys_of_event(None, body):
                yield event_id
        if len(batch) < EVENT_SCAN_BATCH:
            return
        last_id = batch[-1].id


def _may_name(body: str, digit_runs: tuple[str, ...]) -> bool:
    """False when `body` cannot name the person; a body whose digits may be written otherwise (other scripts'
    digits, JSON's \\u escapes) is read whole."""
    if not body.isascii() or "\\u" in body:
        return True
    digits = body.encode("ascii").translate(None, _NOT_DIGITS)
    return any(run.encode("ascii") in digits for run in digit_runs)


def _chunks(values: list, size: int = 500) -> Iterator[list]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _rows_of_flows(model, flow_ids: list[str]) -> list:
    """The rows of `model` on the person's flows, asked for a few hundred flows at a time (a person may have many)."""
    return [
        row for some in _chunks(flow_ids) for row in db.session.scalars(select(model).where(model.flow_id.in_(some)))
    ]


def _audit_entries(subject_key: str, flow_ids: list[str], references: list[str], born: str) -> list[AuditEntry]:
    """Audit entries about the person: on their flows, or a search by their id (kept as a hash prefix). Asked for
    AUDIT_FLOWS_A_QUERY flows at a time: SQLite refuses a condition nested deeper than 1,000 (334 flows at once)."""
    entries: dict[int, AuditEntry] = {}
    for naming in _audit_naming(subject_key, flow_ids, references, born):
        entries.update((entry.id, entry) for entry in db.session.scalars(select(AuditEntry).where(naming)))
    return sorted(entries.values(), key=lambda entry: entry.id)


def _audit_naming(subject_key: str, flow_ids: list[str], references: list[str], born: str) -> Iterator:
    yield AuditEntry.target.like(f"%hash:{subject_key[:12]}%")
    for some in _chunks(flow_ids, AUDIT_FLOWS_A_QUERY):
        # A reveal names the flow (`<id>`), a create the flow and the masked person (`<id> (151086•••••)`): never the
        # start of another id, and `_` or `%` in an id are its own characters (DESIGN allows ids other than UUIDs).
        yield or_(
            AuditEntry.target.in_(some),
            *(AuditEntry.target.startswith(f"{flow_id} (", autoescape=True) for flow_id in some),
        )
    for some in _chunks(references if born else [], AUDIT_FLOWS_A_QUERY):
        # A create the service answered without the flow's id is audited under its reference and the masked person,
        # `LA-10040 (151086•••••)`: references may repeat, so the person's birth digits too.
        starts = or_(*(AuditEntry.target.startswith(f"{reference} (", autoescape=True) for reference in some))
        yield (AuditEntry.action == "create_flow") & starts & AuditEntry.target.contains(born, autoescape=True)


def _row(record, exclude: tuple[str, ...] = ()) -> dict:
    return {
        column.key: _iso(getattr(record, column.key))
        for column in record.__table__.columns
        if column.key not in exclude and column.key != "body"
    }


def _iso(value):
    return value.isoformat() if isinstance(value, datetime | date) else value


def _json_or_text(body: str):
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return body
