"""The per-person access log: who looked at a person's data, when, why and what they saw.

Every row is kept under the person's subject key, the keyed hash the flow index searches by
(PORTAL_INDEX_KEY), so the log itself names nobody: only someone holding a national id (and the
portal's key) can find that person's rows.
"""

import json
import re
from collections.abc import Iterable, Iterator

from flask import has_request_context, request
from flask_login import current_user
from sqlalchemy import func, select

from . import current
from .extensions import db
from .flowindex.keys import read_national_id
from .masking import is_national_id_key
from .models import AccessEntry, FlowRecord
from .paging import KeysetPage, newest_first

FLOW_DETAIL = "flow_detail"
REVEAL = "reveal"
EVENT_PAYLOAD = "event_payload"
EXPORT_ROW = "export_row"
SEARCH = "search"
LOOKUP = "subject_lookup"
BATCH = 500


def subject_key_of(national_id: str | None, country: str | None = None) -> str | None:
    """The person's subject key, or None when `national_id` is no valid id."""
    number = read_national_id(national_id, country)
    return number.keyed_hash(current.settings().index_key) if number else None


def record_access(subject_key: str | None, kind: str, target: str, purpose: str | None = None) -> None:
    """Commit one row before the data is shown; nothing when the person is not known."""
    if subject_key:
        db.session.add(_entry(subject_key, kind, target, purpose))
        db.session.commit()


def recorded_while_read(rows: Iterable, kind: str, key_and_target) -> Iterator:
    """`rows` as they are read (an export), each person's row recorded, committed every BATCH rows."""
    return _recording(rows, kind, key_and_target, *_who())


def _recording(rows: Iterable, kind: str, key_and_target, username: str, address: str | None) -> Iterator:
    pending = 0
    for row in rows:
        subject_key, target = key_and_target(row)
        if subject_key:
            db.session.add(
                AccessEntry(
                    subject_key=subject_key, username=username, kind=kind, target=target[:255], source_ip=address
                )
            )
            pending += 1
        if pending >= BATCH:
            db.session.commit()
            pending = 0
        yield row
    db.session.commit()


def subject_key_of_event(flow_id: str | None, body: str) -> str | None:
    """The person an event is about: its flow's, as the index knows it, else an id the body names."""
    if flow_id:
        known = db.session.scalar(select(FlowRecord.national_id_hash).where(FlowRecord.flow_id == flow_id))
        if known:
            return known
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return next(filter(None, (subject_key_of(value) for value in _id_values(document))), None)


def accesses_of(subject_key: str, before: int | None, limit: int) -> KeysetPage:
    """A person's rows, newest first."""
    return newest_first(select(AccessEntry).where(AccessEntry.subject_key == subject_key), AccessEntry, before, limit)


def count_accesses(subject_key: str) -> int:
    return db.session.scalar(select(func.count()).where(AccessEntry.subject_key == subject_key)) or 0


def masked_id_of(subject_key: str) -> str | None:
    """The person's national id, masked, as the flow index holds it; None when no flow of theirs is indexed."""
    query = select(FlowRecord.national_id_masked).where(FlowRecord.national_id_hash == subject_key).limit(1)
    return db.session.scalar(query)


def _id_values(document, depth: int = 0) -> Iterator[str]:
    """Values under keys naming a national id, then id-shaped numbers in any other text."""
    if depth > 32:
        return
    if isinstance(document, dict):
        for key, value in document.items():
            if is_national_id_key(key) and isinstance(value, str):
                yield value
            else:
                yield from _id_values(value, depth + 1)
    elif isinstance(document, list):
        for item in document:
            yield from _id_values(item, depth + 1)
    elif isinstance(document, str):
        yield from ID_IN_TEXT.findall(document)


# A number in free text that may be a national id (read_national_id decides): NO 11 digits, SE and FI forms.
ID_IN_TEXT = re.compile(r"(?<![0-9])(?:[0-9]{6}[-+A]?[0-9]{3}[0-9A-Y]|[0-9]{11}|[0-9]{8}-?[0-9]{4})(?![0-9])")


def _who() -> tuple[str, str | None]:
    """Who is looking, read now: a streamed export outlives the request's user object."""
    username = current_user.username if current_user and current_user.is_authenticated else "-"
    return username, request.remote_addr if has_request_context() else None


def _entry(subject_key: str, kind: str, target: str, purpose: str | None) -> AccessEntry:
    username, address = _who()
    return AccessEntry(
        subject_key=subject_key, username=username, kind=kind, target=target[:255], purpose=purpose, source_ip=address
    )
