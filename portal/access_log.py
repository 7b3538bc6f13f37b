"""The per-person access log: who looked at a person's data, when, why and what they saw.

Every row is kept under the person's subject key, the keyed hash the flow index searches by
(PORTAL_INDEX_KEY), so the log itself names nobody: only someone holding a national id (and the
portal's key) can find that person's rows.
"""

import json
from collections.abc import Iterable, Iterator

from flask import has_request_context, request
from flask_login import current_user
from sqlalchemy import func, select

from . import current
from .extensions import db
from .flowindex.keys import NationalId, national_id_readings, read_national_id
from .jsondepth import MAX_DEPTH
from .masking import id_spellings_in_text, is_national_id_key, national_id_in_number
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
    return subject_key_of_number(number) if number else None


def subject_key_of_number(number: NationalId) -> str:
    return number.keyed_hash(current.settings().index_key)


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


def subject_keys_of_event(flow_id: str | None, body: str) -> list[str]:
    """Everyone an event is about: its flow's person, as the index knows them, and every person its body names,
    read as masking reads ids (a body that names two people is both people's)."""
    keys = []
    if flow_id:
        known = db.session.scalar(select(FlowRecord.national_id_hash).where(FlowRecord.flow_id == flow_id))
        if known:
            keys.append(known)
    for spellings in _id_spellings(body):
        for key in _keys_of_first_readable(spellings):
            if key not in keys:
                keys.append(key)
    return keys


def _keys_of_first_readable(spellings: tuple[str, ...]) -> list[str]:
    """The subject keys of the first spelling that is a valid id: one for each country it is valid in (a body
    says no country, and 010111-9907 may be the Finn of 1911 or the Swede of 2001)."""
    for spelling in spellings:
        if readings := national_id_readings(spelling):
            return [subject_key_of_number(number) for number in readings]
    return []


def record_event_access(flow_id: str | None, body: str, target: str) -> None:
    """One row for each person the event is about, committed before its body is shown."""
    keys = subject_keys_of_event(flow_id, body)
    for key in keys:
        db.session.add(_entry(key, EVENT_PAYLOAD, target, None))
    if keys:
        db.session.commit()


def accesses_of(subject_key: str, before: int | None, limit: int) -> KeysetPage:
    """A person's rows, newest first."""
    return newest_first(select(AccessEntry).where(AccessEntry.subject_key == subject_key), AccessEntry, before, limit)


def count_accesses(subject_key: str) -> int:
    return db.session.scalar(select(func.count()).where(AccessEntry.subject_key == subject_key)) or 0


def masked_id_of(subject_key: str) -> str | None:
    """The person's national id, masked, as the flow index holds it; None when no flow of theirs is indexed."""
    query = select(FlowRecord.national_id_masked).where(FlowRecord.national_id_hash == subject_key).limit(1)
    return db.session.scalar(query)


def _id_spellings(body: str) -> Iterator[tuple[str, ...]]:
    """The ways to read each possible national id in a stored body: its JSON values (under any key, a number too)
    and keys, or its text when it is no JSON."""
    try:
        document = json.loads(body.removeprefix("\ufeff"))
    except (ValueError, RecursionError):
        yield from _ids_in_text(body)
        return
    yield from _id_spellings_in(document)


def _id_spellings_in(document, depth: int = 0) -> Iterator[tuple[str, ...]]:
    if depth > MAX_DEPTH:  # as deep as the receiver takes a body
        return
    if isinstance(document, dict):
        for key, value in document.items():
            yield from _ids_in_text(key)
            if is_national_id_key(key) and isinstance(value, str):
                yield (value,)
            yield from _id_spellings_in(value, depth + 1)
    elif isinstance(document, list):
        for item in document:
            yield from _id_spellings_in(item, depth + 1)
    elif isinstance(document, str):
        yield from _ids_in_text(document)
    elif (
        isinstance(document, int | float)
        and not isinstance(document, bool)
        and (held := national_id_in_number(document))
    ):
        yield (held,)  # as masking reads numbers: not a time in seconds that reads as a synthetic id


def _ids_in_text(text: str) -> Iterator[tuple[str, ...]]:
    """The ids a text names as masking reads them, but for ten digits standing bare: as often a phone number
    ("0812189876") as a Swedish id, and an erasure must not take someone else's event for the person's."""
    for spellings in id_spellings_in_text(text):
        if not (len(spellings[0]) == 10 and spellings[0].isdigit()):
            yield spellings


def _who() -> tuple[str, str | None]:
    """Who is looking, read now: a streamed export outlives the request's user object."""
    username = current_user.username if current_user and current_user.is_authenticated else "-"
    return username, request.remote_addr if has_request_context() else None


def _entry(subject_key: str, kind: str, target: str, purpose: str | None) -> AccessEntry:
    username, address = _who()
    return AccessEntry(
        subject_key=subject_key, username=username, kind=kind, target=target[:255], purpose=purpose, source_ip=address
    )
