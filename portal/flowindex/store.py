"""Applying observations to the index, with the version rule: newer wins, older never overwrites."""

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import TYPE_CHECKING, Any

from sqlalchemy import BindParameter, Executable, Select, bindparam, insert, select, update
from sqlalchemy.exc import IntegrityError

from ..database import changed_rows
from ..extensions import db
from ..flowapi.records import flow_id_spellings
from ..insight_rollups import insight_state, mark_changed
from ..models import FlowRecord
from .incidents import record_incidents
from .keys import name_key, read_national_id
from .observations import CREATE, DETAILS, SYNC, WEBHOOK, Observation

log = logging.getLogger(__name__)
BATCH = 1000
# What a flow is now, in parts that sources tell separately: (fields, the column of when they were
# true, the column naming their source). A part is overwritten only by an observation at least as new.
STATE_PARTS = (
    (("consent_status",), "status_at", "status_source"),
    (("lifecycle",), "lifecycle_at", "lifecycle_source"),
    (("archived",), "archived_at", "archived_source"),
    (("has_incidents", "version", "updated_at", "actions"), "state_at", None),
)
OPENED_OR_PAST = ("Opened", "Accepted", "Rejected")
DECIDED = ("Accepted", "Rejected")
# What a flow is from its creation on: filled in by any source that knows it.
IDENTITY_FIELDS = ("reference_id", "flow_number", "created_at", "last_name", "country")


@dataclass
class Applied:
    """Which flows an application of observations added, changed or only saw again."""

    new: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def add(self, other: "Applied") -> None:
        self.new |= other.new
        self.changed |= other.changed
        self.seen |= other.seen


def apply_observations(observations: Iterable[Observation], index_key: bytes) -> Applied:
    """Upsert every observation, in batches, each batch one transaction."""
    applied = Applied()
    batch: list[Observation] = []
    for observation in observations:
        batch.append(observation)
        if len(batch) >= BATCH:
            applied.add(_apply_batch(batch, index_key))
            batch = []
    if batch:
        applied.add(_apply_batch(batch, index_key))
    return applied


def _apply_batch(batch: list[Observation], index_key: bytes) -> Applied:
    try:
        return _try_batch(batch, index_key)
    except IntegrityError:
        # Another writer inserted one of these flows meanwhile: read it and merge into it instead.
        db.session.rollback()
        return _try_batch(batch, index_key)


def _try_batch(batch: list[Observation], index_key: bytes) -> Applied:
    """Merge in Python, then write back with one INSERT and one UPDATE statement (executemany)."""
    # Every spelling of each id (a UUID in capitals is the same flow); sorted: writers lock rows in one order.
    ids = {"ids": sorted({spelling for observation in batch for spelling in flow_id_spellings(observation.flow_id)})}
    take_lock, read = _locking_read(db.engine.dialect.name)
    if take_lock is not None:
        db.session.execute(take_lock, ids)
    rows = {row.flow_id: IndexRow(row._mapping) for row in db.session.execute(read, ids)}
    before = {flow_id: insight_state(row) for flow_id, row in rows.items()}
    applied = Applied()
    for observation in batch:
        row = _row_for(rows, observation.flow_id)
        if row is None:
            row = rows[observation.flow_id] = _new_row(observation)
            merge(row, observation, index_key, fresh=True)
            applied.new.add(row.flow_id)
        elif merge(row, observation, index_key):
            applied.changed.add(row.flow_id)
        applied.seen.add(row.flow_id)
    _write_rows([row for row in rows.values() if row.id is None], [row for row in rows.values() if row.id is not None])
    mark_changed(before, rows)  # the insight rollups of what changed are summed again before they are read
    record_incidents(batch)  # in the same transaction: a lost race retries both
    db.session.commit()
    applied.changed -= applied.new
    return applied


def _row_for(rows: dict[str, "IndexRow"], flow_id: str) -> "IndexRow | None":
    """The flow's row under the id as written, else under another spelling of it (the row keeps its own)."""
    found = rows.get(flow_id)
    if found is None:
        found = next((rows[spelling] for spelling in flow_id_spellings(flow_id) if spelling in rows), None)
    return found


@cache
def _locking_read(dialect: str) -> tuple[Executable | None, Select]:
    """The statements that hold a batch's rows (no lost update against a concurrent writer of the same flows),
    then read them; made once, each batch's flow ids bound to them (building and keying them anew cost the
    writer about a tenth of its work)."""
    table = FlowRecord.__table__
    ids: BindParameter[str] = bindparam("ids", expanding=True)
    read = select(table).where(table.c.flow_id.in_(ids))
    if dialect == "postgresql":
        return None, read.with_for_update()
    # SQLite: a first write takes the database's write lock, so the read after it sees the last commit
    return update(table).where(table.c.flow_id.in_(ids)).values(id=table.c.id), read


class IndexRow:
    """One index row as plain attributes: merged in Python, written back in bulk (the ORM's unit of
    work costs more than the database here)."""

    def __init__(self, values: Mapping[Any, Any]) -> None:
        self.__dict__.update({name: None for name in _columns()} | dict(values))

    if TYPE_CHECKING:
        # FlowRecord's columns, set in __init__
        def __getattr__(self, name: str) -> Any: ...
        def __setattr__(self, name: str, value: Any) -> None: ...

    def values(self) -> dict[str, Any]:
        fields = vars(self)
        return {name: fields[name] for name in _insert_columns()}


# What merge works on: an ORM row, or the plain rows a batch is merged into.
Record = FlowRecord | IndexRow


@cache
def _columns() -> tuple[str, ...]:
    return tuple(column.key for column in FlowRecord.__table__.columns)


def _new_row(observation: Observation) -> IndexRow:
    return IndexRow(
        {
            "flow_id": observation.flow_id,
            "stub": observation.source == WEBHOOK,
            "changed_at": observation.seen_at,
            "change_source": observation.source,
            "seen_at": observation.seen_at,
        }
    )


def _write_rows(new: list[IndexRow], existing: list[IndexRow]) -> None:
    table = FlowRecord.__table__
    if new and db.engine.dialect.name == "postgresql":
        _copy_rows(new)
    elif new:
        db.session.execute(insert(table), _inserted_values(new))
    if existing:
        statement, names = _row_update()
        db.session.execute(statement, [{"row_id": row.id} | {n: getattr(row, n) for n in names} for row in existing])


@cache
def _row_update() -> tuple[Executable, tuple[str, ...]]:
    """An existing row's UPDATE (made once) and the columns it writes: all but the keys."""
    table = FlowRecord.__table__
    names = tuple(name for name in _columns() if name not in ("id", "flow_id"))
    return update(table).where(table.c.id == bindparam("row_id")).values({n: bindparam(n) for n in names}), names


def _inserted_values(rows: list[IndexRow]) -> list[dict[str, Any]]:
    """The new rows' values without the columns none of them has a value for: NULL all the same, without a bind
    processor run for each (a webhook event's stub row fills 10 of 41 columns; measured: a fifth of the writer's
    instructions for such events). Columns with a default are kept: left out, they would get it instead of None."""
    values = [row.values() for row in rows]
    named = [name for name in _insert_columns() if name in _defaulted() or any(v[name] is not None for v in values)]
    return [{name: value[name] for name in named} for value in values]


@cache
def _insert_columns() -> tuple[str, ...]:
    return tuple(name for name in _columns() if name != "id")


@cache
def _defaulted() -> frozenset[str]:
    columns = FlowRecord.__table__.columns
    return frozenset(c.key for c in columns if c.default is not None or c.server_default is not None)


def _copy_rows(rows: list[IndexRow]) -> None:
    """New rows through PostgreSQL's COPY: a tenth of the cost of an INSERT per row (a sync's first run)."""
    names = [name for name in _columns() if name != "id"]
    driver_connection = db.session.connection().connection.driver_connection
    assert driver_connection is not None  # a checked-out connection has its DBAPI connection
    cursor = driver_connection.cursor()
    with cursor.copy(f"COPY flow_index ({', '.join(names)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row([getattr(row, name) for name in names])


def merge(record: Record, observation: Observation, index_key: bytes, fresh: bool = False) -> bool:
    """Bring `observation` into `record`; True when something staff can see changed."""
    changed = _merge_identity(record, observation, index_key)
    newer_version = _version_order(record, observation)
    lifecycle = record.lifecycle
    for fields, time_column, source_column in STATE_PARTS:
        carried = any(getattr(observation, name) is not None for name in fields)
        current = newer_version if newer_version is not None else _not_older(record, time_column, observation)
        if carried and current:
            changed |= _merge_part(record, observation, fields, time_column, source_column)
    if lifecycle is not None and record.lifecycle != lifecycle and observation.actions is None:
        record.actions = None  # the service's for the former lifecycle (Cancel on a running flow): unknown till read
    _merge_milestones(record, observation)
    if observation.source == WEBHOOK:
        _merge_heard(record, observation)
    record.seen_at = max(record.seen_at or observation.seen_at, observation.seen_at)
    if observation.listed:
        record.listed_at = max(record.listed_at or observation.seen_at, observation.seen_at)
        record.gone_at = None
    if observation.source != WEBHOOK:
        record.stub = False
        record.unknown_at = None  # the service named it: it knows the flow
    if changed and not fresh:
        record.changed_at = observation.seen_at
        record.change_source = observation.source
    record.last_change_at = last_change(record)
    return changed


def last_change(record: Record) -> datetime | None:
    """The flow's last change for stuck lists: the same rule as migration 0010's backfill."""
    updated, opened = record.updated_at, record.opened_at
    if updated is not None and (opened is None or updated >= opened):
        return updated
    return opened or record.created_at or record.changed_at


def _merge_milestones(record: Record, observation: Observation) -> None:
    """When the flow was first known opened and decided: the earliest time any source puts on it.

    A webhook event says when; a list or retrieve only that it had happened by then (its `updatedAt`,
    when it has one, is closer), so a late event moves the milestone back to its own time.
    """
    status = observation.consent_status
    if status is None and observation.source in DETAILS and observation.updated_at:
        _bound_milestones(record, observation.updated_at)
    if status not in OPENED_OR_PAST:
        return
    when = observation.state_at if observation.source == WEBHOOK else (observation.updated_at or observation.state_at)
    record.opened_at = min(record.opened_at or when, when)
    if status in DECIDED:
        record.decided_at = min(record.decided_at or when, when)


def _bound_milestones(record: Record, updated_at: datetime) -> None:
    """A retrieve answer tells no consent status, but its `updatedAt` is the flow's last change: a status the index
    already knows (opened, or decided: never undone) had come about by then."""
    if record.created_at and updated_at < record.created_at:
        return  # a time before the flow's creation is no time the flow changed
    if record.consent_status in OPENED_OR_PAST and _bounded_by(record.opened_at, updated_at, record.heard_at):
        record.opened_at = updated_at
    if record.consent_status in DECIDED and _bounded_by(record.decided_at, updated_at, record.heard_at):
        record.decided_at = updated_at


def _bounded_by(milestone: datetime | None, updated_at: datetime, heard_at: datetime | None) -> bool:
    """Whether `updated_at` moves the milestone back: it is earlier, and the milestone is a list's or an answer's
    first sight of the status, not a webhook event's own time (those come no later than the last event heard)."""
    return milestone is not None and updated_at < milestone and (heard_at is None or milestone > heard_at)


def _merge_heard(record: Record, observation: Observation) -> None:
    """What the flow's webhook events have told: the highest version, the newest time and its status."""
    if observation.version is not None:
        record.heard_version = max(record.heard_version or observation.version, observation.version)
    if record.heard_at is None or observation.state_at >= record.heard_at:
        record.heard_at = observation.state_at
        record.heard_status = observation.consent_status or record.heard_status


def _version_order(record: Record, observation: Observation) -> bool | None:
    """True/False when both carry a version and they differ (then the version decides); None otherwise."""
    if observation.version is None or record.version is None or observation.version == record.version:
        return None
    return observation.version > record.version


def _not_older(record: Record, time_column: str, observation: Observation) -> bool:
    kept = getattr(record, time_column)
    return kept is None or observation.state_at >= kept


def _take_known(record, observation: Observation, fields: tuple) -> bool:
    """Copy the fields the observation knows (not None) into the record; True when one differed."""
    changed = False
    for name in fields:
        value = getattr(observation, name)
        if value is not None and getattr(record, name) != value:
            setattr(record, name, value)
            changed = True
    return changed


def _merge_part(record, observation: Observation, fields: tuple, time_column: str, source_column: str | None) -> bool:
    changed = _take_known(record, observation, fields)
    setattr(record, time_column, max(getattr(record, time_column) or observation.state_at, observation.state_at))
    if source_column and any(getattr(observation, name) is not None for name in fields):
        setattr(record, source_column, observation.source)
    return changed


def _merge_identity(record: Record, observation: Observation, index_key: bytes) -> bool:
    fields: tuple[str, ...] = IDENTITY_FIELDS
    if observation.source in (*DETAILS, WEBHOOK) and record.listed_at is not None:
        # The list's word stays: a detail page says where its answer disagrees with it (at every view), and an
        # event that spells the reference otherwise does not make the list seem to say so.
        fields = tuple(name for name in IDENTITY_FIELDS if getattr(record, name) is None)
    if record.erased_at is not None:  # the person was erased here: no source brings them back
        fields = tuple(name for name in fields if name != "last_name")
    changed = _take_known(record, observation, fields)
    if observation.last_name and record.last_name == observation.last_name:
        record.last_name_key = name_key(observation.last_name)
    if observation.created_by and not record.created_by:
        record.created_by = observation.created_by
    if observation.source == CREATE and record.created_at is None:
        record.created_at = observation.created_at
    return _merge_national_id(record, observation, index_key) or changed


def _merge_national_id(record: Record, observation: Observation, index_key: bytes) -> bool:
    if record.erased_at is not None:
        return False  # never indexed with the person again once erased
    if record.national_id_hash and observation.source != SYNC:
        return False  # a flow's national id never changes: read and hash it once, but for `flows sync`, which
        # hashes it again under the key of now (PORTAL_INDEX_KEY changed: the rows of the old one found again)
    number = read_national_id(observation.national_id, observation.country or record.country)
    if number is None:
        return False
    keyed = number.keyed_hash(index_key)
    if record.national_id_hash == keyed:
        return False
    record.national_id_hash = keyed
    record.national_id_masked = number.masked
    record.country = number.country
    record.birth_date = number.birth_date
    return True


def index_record(flow_id: str) -> FlowRecord | None:
    return db.session.scalar(select(FlowRecord).where(FlowRecord.flow_id == flow_id))


def mark_gone(listed_since: datetime, archived: bool | None) -> int:
    """Flag flows a complete sync walk did not list (since `listed_since`); returns how many."""
    query = FlowRecord.__table__.update().where(
        FlowRecord.gone_at.is_(None),
        FlowRecord.stub.is_(False),
        (FlowRecord.listed_at.is_(None)) | (FlowRecord.listed_at < listed_since),
    )
    if archived is not None:
        query = query.where(FlowRecord.archived.is_(archived))
    count = changed_rows(query.values(gone_at=listed_since))
    db.session.commit()
    return count
