"""Insights: how consent is going over a range of local days — counts, the funnel, time to decision, per day.

Days are days of the configured time zone (PORTAL_TIMEZONE). Each day's bounds are worked out here as UTC
instants (zoneinfo: a 23- or 25-hour day at a DST change is still one day), and the database counts rows
between them by index: the same SQL on SQLite, which knows no zones, as on PostgreSQL, for any zone.
"""

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta, timezone
from functools import cached_property
from zoneinfo import ZoneInfo

from flask_babel import gettext as _
from flask_babel import pgettext
from sqlalchemy import DateTime, Float, Integer, and_, column, func, literal, or_, select, values
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.sql import Select

from . import insight_rollups as rollups
from .extensions import db
from .masking import mask_text
from .models import FlowIncident, FlowRecord, UtcDateTime
from .presentation import local_date

DEFAULT_RANGE = "7d"
PRESET_DAYS = {"today": 1, "7d": 7, "30d": 30}
RANGES = (*PRESET_DAYS, "custom")
MAX_DAYS = 366
EXACT_PERCENTILE_DAYS = 31  # longer ranges take the time to decision from the histogram
STATUSES = ("Unopened", "Opened", "Accepted", "Rejected")
OPENED_OR_PAST = ("Opened", "Accepted", "Rejected")
UNKNOWN = "unknown"
ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
# Days the calendar arithmetic can always step past; from 2000 on, every zone's offset is a whole number of
# quarter hours (see `_bin_minutes`).
EARLIEST, LATEST = date(2000, 1, 1), date(9998, 12, 31)
BIN_ORIGIN = datetime(2000, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class DateRange:
    """Local days `first` to `last`, both included, in time zone `zone`."""

    kind: str
    first: date
    last: date
    zone: str

    @property
    def days(self) -> list[date]:
        return [self.first + timedelta(days=n) for n in range((self.last - self.first).days + 1)]

    def starts(self, day: date) -> datetime:
        """The UTC instant the local day begins (the first instant of it when midnight is skipped by DST)."""
        return datetime.combine(day, time(), tzinfo=ZoneInfo(self.zone)).astimezone(timezone.utc)

    @property
    def start(self) -> datetime:
        return self.starts(self.first)

    @property
    def end(self) -> datetime:
        """The first instant after the range."""
        return self.starts(self.last + timedelta(days=1))


def local_today(now: datetime, zone: str) -> date:
    return now.astimezone(ZoneInfo(zone)).date()


def preset(kind: str, today: date, zone: str) -> DateRange:
    return DateRange(kind, today - timedelta(days=PRESET_DAYS[kind] - 1), today, zone)


def asked_range(args) -> str:
    """The kind of range the query string asks for. Days without a range (an address written by hand or shared)
    are a custom range: they were ignored, silently (a new user's walk)."""
    days_given = any(args.get(name, "").strip() for name in ("from", "to"))
    return args.get("range", "").strip() or ("custom" if days_given else DEFAULT_RANGE)


def parse_range(args, today: date, zone: str) -> tuple[DateRange, list[str]]:
    """The range the query string asks for, and what was wrong with it (then the last 7 days, or a capped range)."""
    kind = asked_range(args)
    if kind in PRESET_DAYS:
        return preset(kind, today, zone), []
    if kind != "custom":
        message = _(
            "“%(value)s” is not a range the insights know: choose today, 7 days, 30 days or a custom range. "
            "Showing the last 7 days.",
            value=mask_text(kind)[:40],  # a national id pasted into the wrong field is not shown whole
        )
        return preset(DEFAULT_RANGE, today, zone), [message]
    return _custom(args, today, zone)


def _custom(args, today: date, zone: str) -> tuple[DateRange, list[str]]:
    first, first_problem = _read_day(args.get("from", ""), pgettext("the start of a date range", "From"))
    last, last_problem = _read_day(args.get("to", ""), pgettext("the end of a date range", "To"))
    problems = [problem for problem in (first_problem, last_problem) if problem]
    if problems or first is None or last is None:  # a day is None only with a problem to show
        return preset(DEFAULT_RANGE, today, zone), [*problems, _("Showing the last 7 days.")]
    if first > last:
        message = _(
            "The From date (%(first)s) is after the To date (%(last)s): swap them. Showing the last 7 days.",
            first=local_date(first),
            last=local_date(last),
        )
        return preset(DEFAULT_RANGE, today, zone), [message]
    if (last - first).days + 1 > MAX_DAYS:
        capped = last - timedelta(days=MAX_DAYS - 1)
        message = _(
            "A custom range covers at most %(days)s days: showing %(first)s to %(last)s.",
            days=MAX_DAYS,
            first=local_date(capped),
            last=local_date(last),
        )
        return DateRange("custom", capped, last, zone), [message]
    return DateRange("custom", first, last, zone), []


def iso_day(value: str) -> date | None:
    """The day `value` writes as YYYY-MM-DD (as a date field sends it), or None."""
    try:
        return date.fromisoformat(value.strip()) if ISO_DAY.fullmatch(value.strip()) else None
    except ValueError:
        return None


def _read_day(value: str, label: str) -> tuple[date | None, str | None]:
    """A YYYY-MM-DD date, or a message naming the field and what to type."""
    value = value.strip()
    if not value:
        return None, _("A custom range needs a %(field)s date (YYYY-MM-DD).", field=label)
    day = iso_day(value)
    if day is None:
        return None, _(
            "%(field)s: “%(value)s” is not a date; write it as YYYY-MM-DD.", field=label, value=mask_text(value)[:40]
        )
    if not EARLIEST <= day <= LATEST:
        return None, _("%(field)s: %(value)s is outside the dates the insights can show.", field=label, value=value)
    return day, None


@dataclass(frozen=True)
class Day:
    """One local day of the range: flows created, decisions made and incidents first seen that day."""

    day: date
    created: int = 0
    decided: int = 0
    incidents: int = 0


@dataclass
class Insight:
    """What happened to the flows created in a range, and per day."""

    span: DateRange
    statuses: dict[str, int] = field(default_factory=dict)  # Unopened … Rejected, and "unknown"
    archived: int = 0
    cancelled: int = 0
    opened: int = 0
    decided: int = 0  # of the flows created in the range, those with a decision time
    median_seconds: float | None = None
    p90_seconds: float | None = None
    approximate: bool = False  # the percentiles come from the histogram (within rollups.PRECISION)
    days: list[Day] = field(default_factory=list)

    @property
    def created(self) -> int:
        return sum(self.statuses.values())

    @property
    def shown_statuses(self) -> list[tuple[str, int]]:
        """Each consent status and its count; "unknown" only when some flow has no known status."""
        return [(status, count) for status, count in self.statuses.items() if count or status != UNKNOWN]

    @property
    def funnel(self) -> list[tuple[str, int]]:
        return [
            ("created", self.created),
            ("opened", self.opened),
            ("Accepted", self.statuses.get("Accepted", 0)),
            ("Rejected", self.statuses.get("Rejected", 0)),
        ]

    def share(self, count: int) -> float:
        """`count` as a fraction of the flows created (0 when none were)."""
        return count / self.created if self.created else 0.0

    @cached_property
    def busiest(self) -> int:
        """The highest daily count of any series (the per-day chart's scale)."""
        return max((max(day.created, day.decided, day.incidents) for day in self.days), default=0)

    @property
    def incidents(self) -> int:
        return sum(day.incidents for day in self.days)

    @property
    def decisions(self) -> int:
        """Decisions made in the range, whenever their flows were created."""
        return sum(day.decided for day in self.days)


def insight(span: DateRange) -> Insight:
    """Every figure of the insights page for `span`, counted from the rollups once their dirty quarters are summed.

    The time to decision is exact (from the index) for ranges up to EXACT_PERCENTILE_DAYS, and from the histogram,
    within rollups.PRECISION, for longer ones.
    """
    first, end = rollups.quarter_of(span.start), rollups.quarter_of(span.end)
    rollups.refresh(first, end)
    bounds = [rollups.quarter_of(bound) for bound in _bounds(span)]
    per_day = rollups.counts_per_day(bounds)
    result = _counted(span, {n: counts[:-1] for n, counts in per_day.items()})
    incidents = rollups.moments_per_day(FlowIncident.first_seen_at, bounds)
    result.days = [
        Day(day, per_day.get(n, [0])[0], per_day.get(n, [0])[-1], incidents.get(n, 0))
        for n, day in enumerate(span.days)
    ]
    if len(span.days) <= EXACT_PERCENTILE_DAYS:
        result.decided, result.median_seconds, result.p90_seconds = _time_to_decision(span)
    else:
        result.decided, result.median_seconds, result.p90_seconds = rollups.time_to_decision(first, end)
        result.approximate = True
    return result


def live_insight(span: DateRange) -> Insight:
    """The same figures counted live from the index (exact; what the rollups are checked against)."""
    created_per_day = _fold_into_days(span, _created_per_day(span))
    result = _counted(span, created_per_day)
    decided = _fold_into_days(span, _per_day(span, FlowRecord.decided_at))
    incidents = _fold_into_days(span, _per_day(span, FlowIncident.first_seen_at))
    result.days = [
        Day(day, created_per_day.get(n, [0])[0], decided.get(n, [0])[0], incidents.get(n, [0])[0])
        for n, day in enumerate(span.days)
    ]
    result.decided, result.median_seconds, result.p90_seconds = _time_to_decision(span)
    return result


def _counted(span: DateRange, created_per_day: dict[int, list[int]]) -> Insight:
    """An Insight with the status, funnel, archived and cancelled counts of [created, *statuses, opened, …] per day."""
    result = Insight(span)
    result.statuses = {status: 0 for status in (*STATUSES, UNKNOWN)}
    for created, *known, opened, archived, cancelled in created_per_day.values():
        for status, count in zip(STATUSES, known, strict=True):
            result.statuses[status] += count
        result.statuses[UNKNOWN] += created - sum(known)
        result.opened += opened
        result.archived += archived
        result.cancelled += cancelled
    return result


def _bounds(span: DateRange) -> list[datetime]:
    """The first instant of each day of the range, and the first instant after it."""
    return [span.starts(day) for day in span.days] + [span.end]


def _bin_minutes(span: DateRange) -> int:
    """The widest bin (at most an hour) that no local midnight of the range falls inside: 60, 30 or 15 minutes."""
    return math.gcd(60, *(bound.minute for bound in _bounds(span)))


def _per_day(span: DateRange, moment, *aggregates) -> Select:
    """Rows (bin, count, *aggregates) of the rows whose `moment` is in the range, `bin` telling the day.

    PostgreSQL counts per UTC bin (an hour, or less in a zone whose offset has half hours), which
    `_fold_into_days` adds up per local day: bins are cheap to compute while reading one index range (far cheaper
    than converting every row to local time). SQLite counts per day directly, looking each day's range up in the
    index; its `bin` is the day's number.
    """
    counts = (func.count(), *aggregates)
    if db.engine.dialect.name == "postgresql":
        stride = literal(timedelta(minutes=_bin_minutes(span)))
        utc_bin = func.date_bin(stride, moment, literal(BIN_ORIGIN, DateTime(timezone=True)))
        return select(utc_bin, *counts).where(moment >= span.start, moment < span.end).group_by(utc_bin)
    bounds = _bounds(span)
    table = values(column("n", Integer), column("starts", UtcDateTime), column("ends", UtcDateTime), name="days")
    days = table.data([(n, bounds[n], bounds[n + 1]) for n in range(len(bounds) - 1)]).cte("days")
    return (
        select(days.c.n, *counts)
        .select_from(days)
        .join(moment.class_, and_(moment >= days.c.starts, moment < days.c.ends))
        .group_by(days.c.n)
    )


def _fold_into_days(span: DateRange, query: Select) -> dict[int, list[int]]:
    """{day number: [count, *aggregates]} from a `_per_day` query, bins added up per local day."""
    per_day: dict[int, list[int]] = {}
    bounds = _bounds(span)
    for key, *counts in db.session.execute(query):
        day = bisect_right(bounds, key) - 1 if isinstance(key, datetime) else key
        totals = per_day.setdefault(day, [0] * len(counts))
        for index, count in enumerate(counts):
            totals[index] += count
    return per_day


def _created_per_day(span: DateRange) -> Select:
    """Per local day, the flows created that day: by consent status, opened, archived, cancelled.

    A row without a creation time (a flow known only from a webhook event so far) belongs to no day.
    """
    status = FlowRecord.consent_status
    opened = or_(FlowRecord.opened_at.is_not(None), status.in_(OPENED_OR_PAST))
    return _per_day(
        span,
        FlowRecord.created_at,
        *(func.count().filter(status == name) for name in STATUSES),
        func.count().filter(opened),
        func.count().filter(FlowRecord.archived.is_(True)),
        func.count().filter(FlowRecord.lifecycle == "cancelled"),
    )


def _decided_in(span: DateRange):
    return and_(
        FlowRecord.created_at >= span.start, FlowRecord.created_at < span.end, FlowRecord.decided_at.is_not(None)
    )


def _time_to_decision(span: DateRange) -> tuple[int, float | None, float | None]:
    """How many flows created in the range were decided, and the median and p90 of how long it took (seconds)."""
    if db.engine.dialect.name == "postgresql":
        decided, percentiles = db.session.execute(_percentiles_postgres(span)).one()
        return decided, *(percentiles or (None, None))
    durations = db.session.scalars(_durations_sqlite(span)).all()
    return len(durations), percentile(durations, 0.5), percentile(durations, 0.9)


def _percentiles_postgres(span: DateRange) -> Select:
    """Both percentiles from one sort, of float8 seconds (date_part; extract's numeric sorts far slower).

    Decided is a FILTER, not in WHERE: the creation range alone leads the planner to the covering index. A decision
    stamped before the creation (two clocks) counts as immediate, not as negative time.
    """
    seconds = func.greatest(func.date_part("epoch", FlowRecord.decided_at - FlowRecord.created_at), 0)
    decided = FlowRecord.decided_at.is_not(None)
    fractions = literal([0.5, 0.9], ARRAY(Float))
    return select(
        func.count().filter(decided),
        func.percentile_cont(fractions).within_group(seconds).filter(decided),
    ).where(FlowRecord.created_at >= span.start, FlowRecord.created_at < span.end)


def _durations_sqlite(span: DateRange) -> Select:
    days = func.julianday(FlowRecord.decided_at) - func.julianday(FlowRecord.created_at)
    seconds = func.max(days * literal(86400.0), 0.0)
    return select(seconds).where(_decided_in(span)).order_by(seconds)


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """PostgreSQL's percentile_cont over sorted values: linear between the two nearest ranks."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def queries_for_explain(span: DateRange) -> dict[str, Select]:
    """The page's queries by name (from the rollups, and live), for the benchmark's EXPLAIN."""
    first, end = rollups.quarter_of(span.start), rollups.quarter_of(span.end)
    bounds = [rollups.quarter_of(bound) for bound in _bounds(span)]
    queries = {
        "rollup counts per day": rollups.counts_query(bounds),
        "rollup histogram": rollups.histogram_query(-(-first // rollups.PER_DAY), end // rollups.PER_DAY),
        "live created per day": _created_per_day(span),
        "live decided per day": _per_day(span, FlowRecord.decided_at),
        "incidents per day": rollups.moments_query(FlowIncident.first_seen_at, bounds),
    }
    if db.engine.dialect.name == "postgresql":
        queries["live time to decision"] = _percentiles_postgres(span)
    return queries
