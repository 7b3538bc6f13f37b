"""Finding flows in the index: the search box, the filters, counts, keyset pages and the export.

Every query is driven by an index of `flow_index`: a reference or flow id by its own index, a
national id by its keyed hash, a last name by a prefix of its search key, and a filtered list by
the (filter, sort column, id) indexes walked in order. Pages are keyset pages on (sort column, id),
so rows arriving meanwhile never shift a page; flows with no creation time sort as the oldest.
"""

import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import func, or_, select, true, tuple_

from .. import current
from ..extensions import db
from ..models import FlowRecord
from ..paging import MAX_ROW_ID
from .keys import NationalId, name_key, national_id_readings
from .observations import CONSENT_STATUSES

# "changed": the flow's last change as staff go by it (the service's updatedAt, else its opening, creation or first
# sight), not when the portal noticed it: a sync that sees every flow at once would otherwise order them by that.
SORT_COLUMNS = {"created": FlowRecord.created_at, "changed": FlowRecord.last_change_at}
EXPORT_CHUNK = 1000
MAX_IDENTIFIER = 100  # the length of reference_id and flow_id
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_POSITION = re.compile(r"(n|-?[0-9]{1,19})\.([0-9]{1,10})")


@dataclass(frozen=True)
class FlowSearch:
    """What to find: the search box, the filters and the order; None or empty means "any"."""

    text: str | None = None  # a reference, flow id or last-name prefix
    person: str | None = None  # the keyed hash of a national id
    born: date | None = None
    status: str | None = None
    lifecycle: str | None = None
    country: str | None = None
    created_from: date | None = None  # days in PORTAL_TIMEZONE, both included
    created_to: date | None = None
    incidents: bool | None = None
    archived: bool | None = False  # None: current and archived
    sort: str = "created"
    oldest_first: bool = False


@dataclass(frozen=True)
class Position:
    """Where a keyset page starts: a row's sort value (None when it has none) and its row id."""

    value: datetime | None
    row: int

    @classmethod
    def of(cls, record: FlowRecord, sort: str) -> "Position":
        return cls(getattr(record, SORT_COLUMNS[sort].key), record.id)

    @classmethod
    def parse(cls, token: str | None) -> "Position | None":
        """The position a token names, or None when it names none."""
        match = _POSITION.fullmatch(token or "")
        if not match or not 0 < int(match[2]) <= MAX_ROW_ID:
            return None
        if match[1] == "n":
            return cls(None, int(match[2]))
        try:
            return cls(EPOCH + timedelta(microseconds=int(match[1])), int(match[2]))
        except OverflowError:
            return None

    @property
    def token(self) -> str:
        micros = "n" if self.value is None else str((self.value - EPOCH) // timedelta(microseconds=1))
        return f"{micros}.{self.row}"


@dataclass(frozen=True)
class ResultPage:
    rows: list[FlowRecord]
    next_after: Position | None  # where the next page starts, None on the last one
    previous_before: Position | None  # where the previous page ends, None on the first one


def person_searched(text: str) -> NationalId | None:
    """The person a national id typed whole stands for: of a number valid in two countries (010111-9907, a Finn of
    1911 and a Swede of 2001) the first reading the index holds flows of, else the first (the lender's countries
    first, then the number's shape): whichever country a flow was created or indexed for, its number finds it."""
    readings = national_id_readings(text)
    if len(readings) < 2:
        return readings[0] if readings else None
    key = current.settings().index_key
    hashes = [number.keyed_hash(key) for number in readings]
    held = set(db.session.scalars(select(FlowRecord.national_id_hash).where(FlowRecord.national_id_hash.in_(hashes))))
    return next((number for number, hashed in zip(readings, hashes, strict=True) if hashed in held), readings[0])


def flows_named(text: str, most: int = 2) -> list[str]:
    """The flow ids (at most `most`) of the flows whose reference or flow id is `text` (in any letter case), or
    whose flow id starts with it (8 hex digits or more, as the lists show ids cut)."""
    if len(text) > MAX_IDENTIFIER or not text.isprintable():
        return []  # no reference or flow id looks like this (and PostgreSQL refuses a NUL)
    return list(db.session.scalars(select(FlowRecord.flow_id).where(_identifier_clause(text)).limit(most)))


def flow_named(text: str) -> str | None:
    """The flow id of the one flow `text` names (`flows_named`), else None."""
    found = flows_named(text)
    return found[0] if len(found) == 1 else None


def index_knows_reference(text: str) -> bool:
    """Whether some flow in the index has `text` as its reference (in any letter case)."""
    query = select(FlowRecord.id).where(FlowRecord.reference_id.in_(_spellings(text))).limit(1)
    return db.session.scalar(query) is not None


def references_ending_in(number: str, most: int = 5) -> list[tuple[str, str | None]]:
    """(reference, flow id) of flows whose reference is `number` behind a prefix ("LA-10038" for "10038"): what
    staff meant who typed only the number a customer read out; each reference once, the flow id None when several
    flows the service still lists share it. A scan of the index: only for a search that found nothing."""
    if not (number.isascii() and number.isdigit() and 3 <= len(number) <= MAX_IDENTIFIER):
        return []
    query = (
        select(FlowRecord.reference_id, FlowRecord.flow_id, FlowRecord.gone_at.is_not(None))
        .where(FlowRecord.reference_id.like(f"%{number}"), FlowRecord.reference_id != number)
        # flows the service still lists first: one it no longer lists (gone) only when no other has the reference
        .order_by(FlowRecord.reference_id, FlowRecord.gone_at.is_not(None), FlowRecord.id.desc())
        .limit(50)
    )
    found: dict[str, str | None] = {}
    for reference, flow_id, gone in db.session.execute(query):
        if reference is None or reference[: -len(number)][-1:].isdigit():  # not "110038" for "10038"
            continue
        if reference not in found:
            found[reference] = flow_id
        elif not gone:
            found[reference] = None  # several current flows: the list of them
    return list(found.items())[:most]


def search_page(
    search: FlowSearch, limit: int, after: Position | None = None, before: Position | None = None
) -> ResultPage:
    """One page of matching flows: the first, the one after `after`, or the one before `before`."""
    if before is not None:
        rows = _walk(search, backwards=True, start=before, limit=limit + 1)
        earlier = len(rows) > limit
        rows = rows[:limit][::-1]
        return ResultPage(rows, _position(rows, -1, search), _position(rows, 0, search) if earlier else None)
    rows = _walk(search, backwards=False, start=after, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    previous = _position(rows, 0, search) if after else None
    return ResultPage(rows, _position(rows, -1, search) if more else None, previous)


COUNT_CAP = 10_000  # past this many flows a count says "more than", so a broad filter still counts fast


def status_counts(search: FlowSearch) -> dict[str | None, int]:
    """How many flows match every filter but the consent status, per consent status.

    Exact when at most COUNT_CAP flows match (one GROUP BY over them). Past that, each of the four
    statuses (and "none yet") is counted over at most COUNT_CAP + 1 rows by index, so a count above
    COUNT_CAP means "more than COUNT_CAP" and a filter over a million flows still counts in milliseconds.
    """
    conditions = _conditions(replace(search, status=None))
    if _capped_count(conditions) <= COUNT_CAP:
        query = select(FlowRecord.consent_status, func.count()).where(*conditions).group_by(FlowRecord.consent_status)
        return dict(db.session.execute(query).all())
    statuses = {status: FlowRecord.consent_status == status for status in CONSENT_STATUSES}
    counts: dict[str | None, int] = {status: _capped_count([*conditions, term]) for status, term in statuses.items()}
    counts[None] = _capped_count([*conditions, FlowRecord.consent_status.is_(None)])
    return {status: count for status, count in counts.items() if count}


def count_without_a_name(search: FlowSearch) -> int:
    """How many flows a search's filters match whose last name the index does not know (their list items name no
    one; a flow's own page does), capped at COUNT_CAP + 1: a search by name cannot find them."""
    unnamed = [FlowRecord.last_name_key.is_(None), FlowRecord.erased_at.is_(None)]
    return _capped_count([*_conditions(replace(search, text=None)), *unnamed])


def _capped_count(conditions: list) -> int:
    capped = select(FlowRecord.id).where(*conditions).limit(COUNT_CAP + 1).subquery()
    return db.session.scalar(select(func.count()).select_from(capped)) or 0


def export_rows(search: FlowSearch, chunk: int = EXPORT_CHUNK) -> Iterator[FlowRecord]:
    """Every matching flow in the page order, read a keyset chunk at a time (a long export holds no cursor)."""
    start = None
    while True:
        rows = _walk(search, backwards=False, start=start, limit=chunk)
        yield from rows
        if len(rows) < chunk:
            return
        start = Position.of(rows[-1], search.sort)
        db.session.expunge_all()  # the rows are written out: do not keep a million of them in the session


def last_listed() -> datetime | None:
    """When the service last listed a flow to the index (a sync, or a list page); None if it never did."""
    return db.session.scalar(select(func.max(FlowRecord.listed_at)))


def _position(rows: list[FlowRecord], at: int, search: FlowSearch) -> Position | None:
    return Position.of(rows[at], search.sort) if rows else None


def _walk(search: FlowSearch, backwards: bool, start: Position | None, limit: int) -> list[FlowRecord]:
    """Up to `limit` matching rows from `start` on (not included), in page order or against it."""
    descending = search.oldest_first == backwards
    conditions = _conditions(search)
    rows: list[FlowRecord] = []
    for where, order in _segments(SORT_COLUMNS[search.sort], descending, start):
        query = select(FlowRecord).where(*conditions, *where).order_by(*order).limit(limit - len(rows))
        rows += db.session.scalars(query)
        if len(rows) >= limit:
            break
    return rows


# One stretch of a walk: its where conditions and its order by.
Stretch = tuple[list[Any], tuple[Any, ...]]


def _segments(column, descending: bool, start: Position | None) -> list[Stretch]:
    """The (where, order by) of each stretch of the walk from `start` on.

    Rows without a sort value sort as the oldest. A NULL has no place in a row comparison, so they
    are a stretch of their own; each stretch is one ordered walk of an index on (column, id).
    """
    row = FlowRecord.id
    valued, unvalued = [column.is_not(None)], [column.is_(None)]
    if start is not None and start.value is not None:
        key = tuple_(column, row)
        valued.append(key < (start.value, start.row) if descending else key > (start.value, start.row))
    elif start is not None:
        unvalued.append(row < start.row if descending else row > start.row)
    valued_stretch: Stretch = (valued, (column.desc(), row.desc()) if descending else (column.asc(), row.asc()))
    unvalued_stretch: Stretch = (unvalued, (row.desc(),) if descending else (row.asc(),))
    in_unvalued = start is not None and start.value is None
    if descending:  # valued rows, then those without a value; from an unvalued start only the latter remain
        walk = [unvalued_stretch] if in_unvalued else [valued_stretch, unvalued_stretch]
    else:  # from a valued start the unvalued rows lie behind
        walk = [valued_stretch] if start is not None and not in_unvalued else [unvalued_stretch, valued_stretch]
    if not column.nullable and not in_unvalued:
        walk = [valued_stretch]
    return walk


def _conditions(search: FlowSearch) -> list:
    """The WHERE terms of `search`."""
    record = FlowRecord
    terms = []
    if search.text:
        terms.append(_text_clause(search.text))
    if search.person:
        terms.append(record.national_id_hash == search.person)
    if search.archived is not None:
        terms.append(record.archived == search.archived)
    for value, column in (
        (search.born, record.birth_date),
        (search.status, record.consent_status),
        (search.lifecycle, record.lifecycle),
        (search.country, record.country),
    ):
        if value is not None:
            terms.append(column == value)
    if search.incidents is not None:
        # `= true`, not `IS TRUE`: only an equality can use the index
        terms.append(record.has_incidents == true() if search.incidents else record.has_incidents.is_not(True))
    if search.created_from:
        terms.append(record.created_at >= day_start(search.created_from))
    if search.created_to:
        terms.append(record.created_at < day_start(search.created_to + timedelta(days=1)))
    return terms


def _text_clause(text: str):
    """A reference or flow id in any letter case, or the start of a last name (any case, any diacritics)."""
    clauses = [_identifier_clause(text)]
    key = name_key(text)
    if key:
        clauses.append(_name_prefix(key))
    return or_(*clauses)


def _identifier_clause(text: str):
    spellings = _spellings(text)
    clauses = [FlowRecord.reference_id.in_(spellings), FlowRecord.flow_id.in_(spellings)]
    if _UUID_START.fullmatch(text.lower()):  # the start of a flow id, as the lists show it cut ("10975e85")
        start = text.lower()
        clauses.append(
            FlowRecord.flow_id.op("GLOB")(start + "*")
            if db.engine.dialect.name == "sqlite"  # case-sensitive: the flow_id index serves it
            else FlowRecord.flow_id.like(start + "%")
        )
    return or_(*clauses)


# 8 hex digits or more of a UUID's start, its hyphens where a UUID has them: no LIKE or GLOB wildcard in it.
SHORTEST_ID_START = 8
_UUID_START = re.compile(rf"[0-9a-f]{{{SHORTEST_ID_START}}}(-[0-9a-f]{{0,4}}){{0,3}}(-[0-9a-f]{{0,12}})?")


# A reference as people say and type it: its letters and its number run together ("la10040") or apart ("LA 10040").
_REFERENCE_SAID = re.compile(r"([A-Za-z]{1,10})[\s._-]{0,3}([0-9]{1,80})")


def looks_like_a_reference(text: str) -> bool:
    """Whether `text` reads as a reference, as people say and type one (LA-10040, la10040, LA 10040)."""
    return _REFERENCE_SAID.fullmatch(text.strip()) is not None


def _spellings(text: str) -> set[str]:
    """The text in any letter case; a reference as said (`_REFERENCE_SAID`) also with a hyphen and without one:
    "la10040" and "LA 10040" find "LA-10040" (and "B-10038" finds "B10038")."""
    said = _REFERENCE_SAID.fullmatch(text.strip())
    texts = [text, f"{said[1]}-{said[2]}", f"{said[1]}{said[2]}"] if said else [text]
    return {spelling for one in texts for spelling in (one, one.upper(), one.lower())}  # equality: the indexes serve it


def _name_prefix(key: str):
    """Names starting with `key`, as a prefix range the name index serves on each database.

    A name key holds only letters, digits, spaces and hyphens, so neither LIKE's nor GLOB's wildcards need
    escaping. SQLite uses an index for a case-sensitive GLOB, PostgreSQL for LIKE on the varchar_pattern_ops index.
    """
    if db.engine.dialect.name == "sqlite":
        return FlowRecord.last_name_key.op("GLOB")(key + "*")
    return FlowRecord.last_name_key.like(key + "%")


def day_start(day: date) -> datetime:
    """Midnight starting `day` in PORTAL_TIMEZONE."""
    zone = ZoneInfo(current.settings().timezone)
    return datetime.combine(day, time(), tzinfo=zone).astimezone(timezone.utc)


def indexed_mask(person: str) -> str | None:
    """The masked national id of any indexed flow of this person (`person`: the id's keyed hash)."""
    of_person = select(FlowRecord.national_id_masked).where(FlowRecord.national_id_hash == person)
    return db.session.scalar(of_person.where(FlowRecord.national_id_masked.is_not(None)).limit(1))
