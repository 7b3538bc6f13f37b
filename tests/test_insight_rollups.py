"""Insight rollups: the cached per-quarter counts and decision-time histogram answer as the live index does, after
changes, deletions and a refresh racing a write, on SQLite and PostgreSQL."""

import importlib.util
import math
import random
from collections import Counter
from datetime import date, timedelta
from pathlib import Path

import pytest
from sqlalchemy import delete, select, text, update
from sqlalchemy.orm import Session
from support import add_user, sign_in
from test_insights import (
    CUSTOM,
    NOW,
    event,
    flow_id,
    list_item,
    observations,
    utc,
)

from portal.extensions import db
from portal.flowapi.records import FlowSummary
from portal.flowindex.observations import from_summary
from portal.flowindex.store import apply_observations
from portal.insight_rollups import (
    PRECISION,
    Refresh,
    bucket_of,
    histogram_percentile,
    quarter_of,
)
from portal.insights import DateRange, insight, live_insight, percentile
from portal.models import FlowRecord, InsightDirty, InsightDuration, InsightQuarter
from portal.retention import prune_gone_flows
from portal.subjects import SubjectRecords, erase
from portal.views.insights import _plain_grouping, count_number

MIGRATION = Path(__file__).resolve().parents[1] / "portal/migrations/versions/0011_insight_rollups.py"
# A year ending with the known set's week: the long path (histogram percentiles, edges of the range from the index).
YEAR = ("2025-03-09", "2026-03-08")
WEEK = ("2026-03-02", "2026-03-08")


def span(first: str, last: str, zone: str = "Europe/Oslo") -> DateRange:
    return DateRange("custom", date.fromisoformat(first), date.fromisoformat(last), zone)


def counted(result) -> tuple:
    """Everything but the percentiles: exact on both paths."""
    days = [(day.day, day.created, day.decided, day.incidents) for day in result.days]
    return result.statuses, result.opened, result.archived, result.cancelled, result.decided, days


def both(app, first: str, last: str, zone: str = "Europe/Oslo"):
    """(from the rollups, live) for the range, each in its own session."""
    with app.app_context():
        rolled = insight(span(first, last, zone))
        db.session.remove()
        live = live_insight(span(first, last, zone))
        db.session.remove()
    return rolled, live


def assert_same(rolled, live) -> None:
    assert counted(rolled) == counted(live)
    for name in ("median_seconds", "p90_seconds"):
        exact, approximate = getattr(live, name), getattr(rolled, name)
        if not rolled.approximate or exact is None:
            assert approximate == exact
        else:  # a bucket's middle is within PRECISION of any duration in it
            assert approximate == pytest.approx(exact, rel=PRECISION)


def apply(app, observations) -> None:
    with app.app_context():
        apply_observations(observations, app.extensions["portal.settings"].index_key)
        db.session.remove()


def dirty(app) -> dict[int, int]:
    with app.app_context():
        marks = {
            quarter: stamp for quarter, stamp in db.session.execute(select(InsightDirty.quarter, InsightDirty.stamp))
        }
        db.session.remove()
        return marks


def filled(make_app, database: str, zone: str = "Europe/Oslo"):
    """A portal in time zone `zone` whose clock says NOW, its index filled with test_insights' known set."""
    app = make_app(database=database, WTF_CSRF_ENABLED=False, PORTAL_TIMEZONE=zone)
    app.extensions["portal.clock"] = NOW.timestamp
    apply(app, observations())
    return app


@pytest.fixture
def make_filled(make_app, database_url):
    return lambda zone="Europe/Oslo": filled(make_app, database_url, zone)


@pytest.mark.parametrize("zone", ["Europe/Oslo", "America/New_York", "Asia/Kolkata", "Asia/Kathmandu"])
def test_the_rollups_answer_as_the_live_index_does(make_filled, zone):
    app = make_filled(zone)
    for first, last in (
        WEEK,
        YEAR,
        ("2026-03-07", "2026-03-08"),
        ("2026-03-10", "2026-03-10"),
        ("2025-01-01", "2025-01-31"),
    ):
        rolled, live = both(app, first, last, zone)
        assert_same(rolled, live)
        assert rolled.approximate == (first == YEAR[0])


def test_a_long_range_gives_the_known_set_s_figures_and_says_its_times_are_approximate(make_filled):
    app = make_filled()
    rolled, _ = both(app, *YEAR)
    assert rolled.created == 9 and rolled.decided == 4  # all but the flow of 9 March; the stub has no creation
    assert rolled.statuses == {"Unopened": 3, "Opened": 1, "Accepted": 3, "Rejected": 1, "unknown": 1}
    assert (rolled.opened, rolled.archived, rolled.cancelled) == (5, 2, 1)
    # Decided after 1 hour, 4 hours, 1 day and (the flow of 1 March) 11 hours 1 minute.
    assert rolled.median_seconds == pytest.approx((4 * 3600 + 11 * 3600 + 60) / 2, rel=PRECISION)
    client = app.test_client()
    assert sign_in(client, add_user(app, role="viewer")).status_code == 302
    page = client.get(f"/insights?range=custom&from={YEAR[0]}&to={YEAR[1]}")
    assert 'data-testid="approximate"' in page.text and "within 2.5%" in page.text
    assert "≈ " in page.text.split('data-figure="median"')[1].split("</tr>")[0]
    week = client.get(CUSTOM)
    assert 'data-testid="approximate"' not in week.text and "≈" not in week.text


def test_a_change_after_a_first_view_shows_on_the_next(make_filled):
    app = make_filled()
    assert dirty(app)
    first, _ = both(app, *YEAR)
    week = span(*WEEK)
    assert not [q for q in dirty(app) if quarter_of(week.start) <= q < quarter_of(week.end)]
    apply(
        app,
        [
            event("opened", "flow.status_changed", "Rejected", "2026-03-09 09:00"),  # decided outside the week
            list_item("unopened", "Unopened", True, NOW),  # archived now
            from_summary(
                FlowSummary.from_json(
                    {
                        "id": flow_id("new"),
                        "status": "Accepted",
                        "createdAt": "2026-03-04T10:00:00Z",
                        "updatedAt": "2026-03-04T10:30:00Z",
                    }
                ),
                False,
                NOW,
            ),  # fmt: skip
        ],
    )
    second, live = both(app, *YEAR)
    assert_same(second, live)
    assert (second.created, second.archived, second.decided) == (
        first.created + 1,
        first.archived + 1,
        first.decided + 2,
    )
    assert second.statuses["Rejected"] == 2 and second.statuses["Opened"] == 0
    weekly, live = both(app, *WEEK)
    assert_same(weekly, live)


def test_flows_removed_by_retention_leave_the_figures_and_an_erased_person_s_stay_in_them(make_filled):
    app = make_filled()
    before, _ = both(app, *YEAR)
    with app.app_context():
        gone = [flow_id("accepted"), flow_id("rejected")]
        db.session.execute(
            update(FlowRecord).where(FlowRecord.flow_id.in_(gone)).values(gone_at=NOW - timedelta(days=90))
        )
        db.session.commit()  # a flow found gone still counts: no mark needed
        assert prune_gone_flows(NOW - timedelta(days=30)) == 2
        db.session.remove()
    after_retention, live = both(app, *YEAR)
    assert_same(after_retention, live)
    assert after_retention.created == before.created - 2 and after_retention.decided == before.decided - 2
    with app.app_context():
        rows = list(db.session.scalars(select(FlowRecord).where(FlowRecord.flow_id == flow_id("archived"))))
        erase(SubjectRecords("subject", flows=rows), held=(), actor="admin")
        db.session.remove()
    after_erasure, live = both(app, *YEAR)
    assert_same(after_erasure, live)
    # the flow stays in the index without the person (erased_at): it was created and decided all the same
    assert (after_erasure.created, after_erasure.decided) == (after_retention.created, after_retention.decided)


def test_the_migration_marks_every_populated_quarter_so_a_first_view_sums_them(make_filled):
    app = make_filled()
    both(app, *YEAR)
    specification = importlib.util.spec_from_file_location("migration_0011", MIGRATION)
    migration = importlib.util.module_from_spec(specification)
    specification.loader.exec_module(migration)
    with app.app_context():
        for model in (InsightDirty, InsightQuarter, InsightDuration):
            db.session.execute(delete(model))
        db.session.execute(text(migration.mark_all(db.engine.dialect.name)))
        db.session.commit()
        db.session.remove()
    with app.app_context():
        created = {quarter_of(moment) for moment in db.session.scalars(select(FlowRecord.created_at)) if moment}
        decided = {quarter_of(moment) for moment in db.session.scalars(select(FlowRecord.decided_at)) if moment}
        db.session.remove()
    assert set(dirty(app)) == created | decided
    rolled, live = both(app, *YEAR)
    assert_same(rolled, live)
    assert rolled.created == 9


def test_a_refresh_racing_a_write_keeps_the_quarter_dirty(make_app, postgres_database):
    """PostgreSQL: the writer commits between the refresh's sums and its unmarking (SQLite's refresh holds the write
    lock throughout, so no write can come between)."""
    app = filled(make_app, postgres_database)
    week = span(*WEEK)
    changed = quarter_of(utc("2026-03-05 08:00"))  # the quarter the "rejected" flow was created in
    with app.app_context():
        with Session(db.engine) as other:
            refresh = Refresh(other, quarter_of(week.start), quarter_of(week.end))
            assert refresh.read_marks()
            refresh.sum()
            apply_observations(
                [list_item("rejected", "Rejected", True, NOW)], app.extensions["portal.settings"].index_key
            )
            db.session.remove()
            refresh.write()
        stamp = db.session.scalar(select(InsightDirty.stamp).where(InsightDirty.quarter == changed))
        assert stamp == refresh.marks[changed] + 1  # marked again by the write that raced the refresh
        assert not db.session.scalar(select(InsightQuarter.archived).where(InsightQuarter.quarter == changed))
        db.session.remove()
    rolled, live = both(app, *WEEK)
    assert_same(rolled, live)
    assert rolled.archived == 3
    assert changed not in dirty(app)


def test_histogram_percentiles_are_within_the_stated_precision():
    chance = random.Random(12)
    for size in (1, 2, 3, 10, 101, 5000):
        durations = sorted(chance.lognormvariate(9, 1.5) for _ in range(size))
        histogram = Counter(bucket_of(seconds) for seconds in durations)
        for fraction in (0.5, 0.9):
            assert histogram_percentile(histogram, fraction) == pytest.approx(
                percentile(durations, fraction), rel=PRECISION
            )
    assert histogram_percentile(Counter(), 0.5) is None
    assert histogram_percentile(Counter({bucket_of(0.0): 3}), 0.9) == 0.5  # under a second: half a second
    assert math.isclose(PRECISION, 0.0247, abs_tol=0.0001)


def test_counts_are_grouped_as_the_reader_s_language_groups_them(make_filled):
    """The per-day figures' fast formatter agrees with Babel, and leaves other groupings (India's) to Babel."""
    app = make_filled()
    assert (_plain_grouping("en"), _plain_grouping("nb"), _plain_grouping("en_IN")) == (",", "\xa0", None)
    for language, written in (("en", "1,234,567"), ("nb", "1\xa0234\xa0567")):
        with app.test_request_context(headers={"Accept-Language": language}):
            assert count_number(1234567) == written
