"""Insight rollups: the flow index summed per UTC quarter hour, and decision times per UTC day, kept as a cache.

Whatever changes a flow's insight figures (the index writer, retention of gone flows, a subject's erasure) marks the
quarter hours of its creation and decision dirty, in its own transaction, with a stamp that grows at every mark.
Before the insights read a range, `refresh` sums its dirty quarters again from the index and removes a mark only
while its stamp is still the one it read: a change committed meanwhile keeps its quarter dirty for the next view.
Counts are exact; percentiles from the histogram are within PRECISION of the true value.
"""

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from functools import cache
from typing import Any

from sqlalchemy import (
    Executable,
    Integer,
    and_,
    bindparam,
    case,
    cast,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, scoped_session

from .extensions import db
from .models import FlowRecord, InsightDirty, InsightDuration, InsightQuarter

# A session of one's own, or Flask-SQLAlchemy's db.session (a scoped_session that acts as one).
AnySession = Session | scoped_session[Any]

QUARTER = 900  # seconds: from 2000 on, every zone's midnight falls on a UTC quarter hour
DAY = 86400
PER_DAY = DAY // QUARTER
RATIO = 1.05  # each duration bucket is 5 % wider than the one before
PRECISION = math.sqrt(RATIO) - 1  # a bucket's middle is at most 2.47 % from any duration in it
MAX_RANGES = 32  # a refresh reads at most this many ranges of the index (nearby dirty quarters summed together)
REFRESH_LOCK = 0x1_5167  # PostgreSQL advisory lock: one refresh at a time
STATUSES = ("Unopened", "Opened", "Accepted", "Rejected")
OPENED_OR_PAST = ("Opened", "Accepted", "Rejected")
# What a flow contributes to the rollups: a change to any of these marks its quarters.
INSIGHT_FIELDS = ("created_at", "decided_at", "consent_status", "opened_at", "archived", "lifecycle")
COUNTS = ("created", "unopened", "opened", "accepted", "rejected", "opened_or_past", "archived", "cancelled")


def quarter_of(moment: datetime) -> int:
    return math.floor(moment.timestamp() / QUARTER)


def starts(quarter: int) -> datetime:
    return datetime.fromtimestamp(quarter * QUARTER, timezone.utc)


def bucket_of(seconds: float) -> int:
    """The log-spaced bucket of a duration; -1 for under a second."""
    return -1 if seconds < 1 else math.floor(math.log(seconds) / math.log(RATIO))


def middle_of(bucket: int) -> float:
    """The duration a bucket stands for: its geometric middle (half a second for the bucket under a second)."""
    return 0.5 if bucket < 0 else RATIO ** (bucket + 0.5)


# -- marking -------------------------------------------------------------------------------------------------


def insight_state(row) -> tuple:
    return tuple(getattr(row, name) for name in INSIGHT_FIELDS)


def mark_changed(before: Mapping[str, tuple | None], rows: dict) -> None:
    """Mark the quarters of the flows whose insight fields differ from `before` (their state when read)."""
    quarters: set[int] = set()
    for flow_id, row in rows.items():
        old, new = before.get(flow_id), insight_state(row)
        if old != new:
            quarters |= _quarters_of(old) | _quarters_of(new)
    mark_quarters(quarters)


def mark_flows(condition) -> None:
    """Mark the quarters of the index rows matching `condition` (before they are deleted)."""
    rows = db.session.execute(select(FlowRecord.created_at, FlowRecord.decided_at).where(condition))
    mark_quarters({quarter for row in rows for quarter in _quarters_of(row)})


def _quarters_of(state: tuple | None) -> set[int]:
    return {quarter_of(moment) for moment in (state or ())[:2] if moment is not None}


def mark_quarters(quarters: Iterable[int], session: Session | None = None) -> None:
    """Mark quarters dirty (an upsert raising the stamp), in the caller's transaction; in order, as rows lock."""
    quarters = sorted(set(quarters))
    if not quarters:
        return
    active: AnySession = session or db.session
    statement = _marking(active.get_bind().dialect.name)
    active.execute(statement, [{"quarter": quarter, "stamp": 1} for quarter in quarters])


@cache
def _marking(dialect_name: str) -> Executable:
    """The upsert that marks a quarter, made once (the flow-index writer marks some in most of its batches)."""
    table = InsightDirty.__table__
    dialect = postgresql if dialect_name == "postgresql" else sqlite
    upsert = dialect.insert(table)
    return upsert.on_conflict_do_update(index_elements=[table.c.quarter], set_={"stamp": table.c.stamp + 1})


# -- refreshing ----------------------------------------------------------------------------------------------


def refresh(first: int, end: int) -> None:
    """Sum again the dirty quarters from `first` up to `end` (quarter numbers), in one transaction."""
    Refresh(db.session, first, end).run()


class Refresh:
    """One refresh in steps (lock and read the marks, sum, write back), so a test can interleave a write."""

    def __init__(self, session: AnySession, first: int, end: int):
        self.session, self.first, self.end = session, first, end
        self.marks: dict[int, int] = {}
        self.quarters: list[dict] = []
        self.durations: list[dict] = []

    def run(self) -> None:
        dirty = InsightDirty.quarter
        if self.session.scalar(select(dirty).where(dirty >= self.first, dirty < self.end).limit(1)) is None:
            return  # nothing to sum: no lock taken, so views of a clean range never wait for one another
        self.session.commit()  # SQLite: a read transaction may not turn into the write that takes the lock
        if self.read_marks():
            self.sum()
            self.write()
        else:
            self.session.commit()

    @property
    def postgres(self) -> bool:
        return self.session.get_bind().dialect.name == "postgresql"

    def read_marks(self) -> bool:
        """Hold the refresh lock, then read the range's marks; True when there are any."""
        if self.postgres:
            self.session.execute(select(func.pg_advisory_xact_lock(REFRESH_LOCK)))
        else:  # SQLite: a first write takes the database's write lock for the whole refresh
            self.session.execute(update(InsightDirty).where(InsightDirty.quarter < 0).values(stamp=InsightDirty.stamp))
        dirty = InsightDirty.quarter
        query = select(dirty, InsightDirty.stamp).where(dirty >= self.first, dirty < self.end)
        self.marks = {quarter: stamp for quarter, stamp in self.session.execute(query)}
        return bool(self.marks)

    @property
    def spans(self) -> list[tuple[int, int]]:
        """The marked quarters as at most MAX_RANGES ranges (first, end): near runs are summed together whole."""
        return _merged(_runs(self.marks))

    @property
    def day_spans(self) -> list[tuple[int, int]]:
        """The UTC days the spans touch, as at most MAX_RANGES ranges of day numbers."""
        days = {day for first, end in self.spans for day in range(first // PER_DAY, (end - 1) // PER_DAY + 1)}
        return _merged(_runs(days))

    def sum(self) -> None:
        """Sum every quarter of the spans (and every UTC day they touch) from the index: one query each."""
        spans, postgres = self.spans, self.postgres
        summed: dict[int, dict] = {}  # every quarter of the spans is replaced: those with nothing are left out
        created = _quarter_expression(FlowRecord.created_at, postgres)
        for quarter, *counts in self.session.execute(_created_in(spans, created)):
            summed[quarter] = dict(zip(COUNTS, counts, strict=True), quarter=quarter, decisions=0)
        decided = _quarter_expression(FlowRecord.decided_at, postgres)
        for quarter, count in self.session.execute(_decided_in(spans, decided)):
            summed.setdefault(quarter, dict.fromkeys(COUNTS, 0) | {"quarter": quarter})["decisions"] = count
        self.quarters = list(summed.values())
        day_spans = [(first * PER_DAY, end * PER_DAY) for first, end in self.day_spans]
        rows: Iterable[tuple[tuple[int, int], int]]
        if postgres:
            rows = (((day, bucket), n) for day, bucket, n in self.session.execute(_histogram_postgres(day_spans)))
        else:  # SQLite may be built without ln(): bucketed here
            rows = Counter(
                (math.floor(created_at.timestamp() / DAY), bucket_of(seconds))
                for created_at, seconds in self.session.execute(_durations(day_spans, postgres))
            ).items()
        self.durations = [{"day": day, "bucket": bucket, "flows": n} for (day, bucket), n in rows]

    def write(self) -> None:
        """Replace the sums of the spans and days; unmark a quarter only if no change came since it was read."""
        quarters, durations, dirty = (model.__table__.c for model in (InsightQuarter, InsightDuration, InsightDirty))
        self.session.execute(delete(InsightQuarter).where(_within(quarters.quarter, self.spans)))
        self.session.execute(delete(InsightDuration).where(_within(durations.day, self.day_spans)))
        if self.quarters:
            self.session.execute(insert(InsightQuarter), self.quarters)
        if self.durations:
            self.session.execute(insert(InsightDuration), self.durations)
        unmark = delete(InsightDirty.__table__).where(dirty.quarter == bindparam("q"), dirty.stamp == bindparam("s"))
        self.session.execute(unmark, [{"q": quarter, "s": stamp} for quarter, stamp in sorted(self.marks.items())])
        self.session.commit()


def _runs(numbers: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted numbers as runs of consecutive ones: [(first, end)], `end` excluded."""
    runs: list[list[int]] = []
    for number in sorted(numbers):
        if runs and runs[-1][1] == number:
            runs[-1][1] = number + 1
        else:
            runs.append([number, number + 1])
    return [(first, end) for first, end in runs]


def _merged(runs: list[tuple[int, int]], limit: int = MAX_RANGES) -> list[tuple[int, int]]:
    """At most `limit` ranges covering the runs, by closing the narrowest gaps between them."""
    if len(runs) <= limit:
        return runs
    closed = sorted(runs[n + 1][0] - runs[n][1] for n in range(len(runs) - 1))[len(runs) - limit - 1]
    merged = [list(runs[0])]
    for first, end in runs[1:]:
        if first - merged[-1][1] <= closed:
            merged[-1][1] = end
        else:
            merged.append([first, end])
    return [(first, end) for first, end in merged]


def _within(number, ranges: list[tuple[int, int]]):
    return or_(*(and_(number >= first, number < end) for first, end in ranges))


def _between(moment, spans: list[tuple[int, int]]):
    """`moment` within one of the spans of quarters (an index range scan each)."""
    return or_(*(and_(moment >= starts(first), moment < starts(end)) for first, end in spans))


def _quarter_expression(moment, postgres: bool):
    if postgres:
        return cast(func.floor(func.date_part("epoch", moment) / QUARTER), Integer)
    return cast(func.strftime("%s", moment), Integer) // QUARTER


def _created_in(spans: list[tuple[int, int]], quarter):
    """Per quarter of the spans, what the flows created in it are now."""
    status = FlowRecord.consent_status
    opened = or_(FlowRecord.opened_at.is_not(None), status.in_(OPENED_OR_PAST))
    return (
        select(
            quarter,
            func.count(),
            *(func.count().filter(status == name) for name in STATUSES),
            func.count().filter(opened),
            func.count().filter(FlowRecord.archived.is_(True)),
            func.count().filter(FlowRecord.lifecycle == "cancelled"),
        )
        .where(_between(FlowRecord.created_at, spans))
        .group_by(quarter)
    )


def _decided_in(spans: list[tuple[int, int]], quarter):
    """Per quarter of the spans, the decisions made in it."""
    return select(quarter, func.count()).where(_between(FlowRecord.decided_at, spans)).group_by(quarter)


def decision_seconds(postgres: bool):
    """Seconds from creation to decision; a decision stamped before the creation (two clocks) counts as immediate."""
    if postgres:
        return func.greatest(func.date_part("epoch", FlowRecord.decided_at - FlowRecord.created_at), 0)
    days = func.julianday(FlowRecord.decided_at) - func.julianday(FlowRecord.created_at)
    return func.max(days * literal(86400.0), 0.0)


def _durations(spans: list[tuple[int, int]], postgres: bool):
    """(created_at, seconds to decision) of the decided flows created in the spans of quarters."""
    moment = FlowRecord.created_at
    return select(moment, decision_seconds(postgres)).where(_between(moment, spans), FlowRecord.decided_at.is_not(None))


def _histogram_postgres(spans: list[tuple[int, int]]):
    """(UTC day, bucket, flows) of the decided flows created in the spans, bucketed as `bucket_of` does."""
    day = cast(func.floor(func.date_part("epoch", FlowRecord.created_at) / DAY), Integer)
    seconds = decision_seconds(postgres=True)
    bucket = case((seconds < 1, -1), else_=cast(func.floor(func.ln(seconds) / math.log(RATIO)), Integer))
    decided = FlowRecord.decided_at.is_not(None)
    return (
        select(day, bucket, func.count()).where(_between(FlowRecord.created_at, spans), decided).group_by(day, bucket)
    )


# -- reading -------------------------------------------------------------------------------------------------


def counts_per_day(bounds: list[int]) -> dict[int, list[int]]:
    """{day number: [*COUNTS, decisions]} for the days between consecutive `bounds` (quarter numbers)."""
    return {n: [int(count) for count in counts] for n, *counts in db.session.execute(counts_query(bounds))}


def counts_query(bounds: list[int]):
    quarter = InsightQuarter.quarter
    day = _day_number(quarter, bounds)
    sums = (func.sum(getattr(InsightQuarter, name)) for name in (*COUNTS, "decisions"))
    return select(day, *sums).where(quarter >= bounds[0], quarter < bounds[-1]).group_by(day)


def moments_per_day(moment, bounds: list[int]) -> dict[int, int]:
    """{day number: rows whose `moment` falls on it} for the days between consecutive `bounds` (quarter numbers),
    grouped per local day in the database (a few hundred rows back, not one per UTC hour)."""
    return {n: count for n, count in db.session.execute(moments_query(moment, bounds))}


def moments_query(moment, bounds: list[int]):
    day = _day_number(_quarter_expression(moment, db.engine.dialect.name == "postgresql"), bounds)
    return select(day, func.count()).where(moment >= starts(bounds[0]), moment < starts(bounds[-1])).group_by(day)


def _day_number(quarter, bounds: list[int]):
    """The day of the range a quarter falls on, in integer arithmetic: one CASE branch per run of 24-hour days and
    one per other day (a DST change), so the database sums whole local days in any zone."""
    branches, n, last = [], 0, len(bounds) - 1
    while n < last:
        end = n
        while end < last and bounds[end + 1] - bounds[end] == PER_DAY:
            end += 1
        if end > n:
            branches.append((quarter < bounds[end], (quarter - bounds[n]) // PER_DAY + n))
        else:
            end = n + 1
            branches.append((quarter < bounds[end], literal(n)))
        n = end
    if len(branches) == 1:
        return branches[0][1]
    return case(*branches[:-1], else_=branches[-1][1])


def time_to_decision(first: int, end: int) -> tuple[int, float | None, float | None]:
    """Decided flows created from quarter `first` up to `end`, and the median and p90 of their time to decision.

    Whole UTC days come from the histogram, the hours at either end from the index; the count is exact, the
    percentiles within PRECISION (half a second for durations under a second).
    """
    first_day, end_day = -(-first // PER_DAY), end // PER_DAY
    histogram: Counter = Counter()
    edges = [(first, end)]
    if first_day < end_day:
        query = histogram_query(first_day, end_day)
        histogram.update({bucket: int(count) for bucket, count in db.session.execute(query)})
        edges = [(first, first_day * PER_DAY), (end_day * PER_DAY, end)]
    edges = [(low, high) for low, high in edges if low < high]
    if edges:
        postgres = db.engine.dialect.name == "postgresql"
        histogram.update(bucket_of(seconds) for _, seconds in db.session.execute(_durations(edges, postgres)))
    total = sum(histogram.values())
    return total, histogram_percentile(histogram, 0.5), histogram_percentile(histogram, 0.9)


def histogram_query(first_day: int, end_day: int):
    bucket, day = InsightDuration.bucket, InsightDuration.day
    return select(bucket, func.sum(InsightDuration.flows)).where(day >= first_day, day < end_day).group_by(bucket)


def histogram_percentile(histogram: Counter, fraction: float) -> float | None:
    """percentile_cont over the durations the buckets stand for: linear between the two nearest ranks."""
    total = sum(histogram.values())
    if not total:
        return None
    position = fraction * (total - 1)
    low, high = math.floor(position), math.ceil(position)
    at_low, at_high = _at_rank(histogram, low), _at_rank(histogram, high)
    return at_low + (at_high - at_low) * (position - low)


def _at_rank(histogram: Counter, rank: int) -> float:
    seen = 0
    for bucket in sorted(histogram):
        seen += histogram[bucket]
        if rank < seen:
            return middle_of(bucket)
    raise ValueError(rank)
