"""Insights: counts, funnel, time to decision and per-day series against a known set of flows, on SQLite and
PostgreSQL, in more than one time zone; the range picker's validation; sign-in."""

import re
import uuid
from collections import Counter
from datetime import date, datetime, timedelta, timezone
from html import unescape
from urllib.parse import parse_qsl
from zoneinfo import ZoneInfo

import pytest
from support import add_user, sign_in

from portal.extensions import db
from portal.flowapi.records import FlowSummary
from portal.flowindex.observations import DETAIL, Observation, from_event, from_summary
from portal.flowindex.store import apply_observations
from portal.insights import DateRange, insight, parse_range, percentile

NOW = datetime(2026, 3, 10, 11, 0, tzinfo=timezone.utc)  # 12:00 in Oslo, before either DST change


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


def flow_id(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"insights/{name}"))


# name: (created, what happens to it). In Oslo (UTC+1 in March) the range 2026-03-02 .. 2026-03-08 starts at
# 2026-03-01 23:00 UTC and ends at 2026-03-08 23:00 UTC.
FLOWS = {
    "unopened": ("2026-03-02 09:00", []),
    "opened": ("2026-03-03 10:00", [("event", "Opened", "2026-03-03 11:00")]),
    "accepted": ("2026-03-03 12:00", [("event", "Accepted", "2026-03-03 13:00")]),  # decided after 1 hour
    "rejected": ("2026-03-05 08:00", [("list", "Rejected", "2026-03-05 12:00")]),  # 4 hours, seen in the list
    "archived": ("2026-03-06 08:00", [("event", "Accepted", "2026-03-07 08:00"), ("archive", "Accepted", None)]),
    "late evening": ("2026-03-07 22:30", []),  # 23:30 in Oslo: 7 March
    "after midnight": ("2026-03-07 23:30", []),  # 00:30 in Oslo: 8 March (both 7 March in UTC)
    "cancelled": ("2026-03-08 10:00", [("cancel", None, None)]),  # no consent status known
    "day before": ("2026-03-01 22:59", [("event", "Accepted", "2026-03-02 10:00")]),  # 23:59 in Oslo, 1 March
    "day after": ("2026-03-08 23:00", []),  # 00:00 in Oslo, 9 March
}
# (flow, when first seen): 22:59 UTC is 23:59 in Oslo on 4 March, 23:00 UTC midnight of 5 March.
INCIDENTS = (("opened", "2026-03-04 22:59"), ("rejected", "2026-03-04 23:00"))
STUB_DECIDED = "2026-03-04 12:00"
CUSTOM = "/insights?range=custom&from=2026-03-02&to=2026-03-08"


def list_item(name: str, status: str, archived: bool, seen: datetime, updated: str | None = None) -> Observation:
    item = {"id": flow_id(name), "status": status, "referenceId": f"LA-{name}", "createdAt": FLOWS[name][0] + "Z"}
    if updated:
        item["updatedAt"] = updated + "Z"
    return from_summary(FlowSummary.from_json(item), archived, seen)


def event(name: str, event_type: str, status: str | None, at: str, payload: dict | None = None) -> Observation:
    occurred = utc(at)
    return from_event(flow_id(name), event_type, status, occurred, None, payload or {}, occurred + timedelta(seconds=1))


def observations() -> list[Observation]:
    """What the portal would have seen: each flow in the list just after its creation, then what happened."""
    seen = []
    for name, (created, happenings) in FLOWS.items():
        listed = utc(created) + timedelta(minutes=1)
        if not any(kind == "cancel" for kind, _, _ in happenings):
            seen.append(list_item(name, "Unopened", False, listed))
        for kind, status, at in happenings:
            if kind == "event":
                seen.append(event(name, "flow.status_changed", status, at))
            elif kind == "list":
                seen.append(list_item(name, status, False, utc(at) + timedelta(minutes=30), updated=at))
            elif kind == "archive":
                seen.append(list_item(name, status, True, NOW - timedelta(hours=1)))
            elif kind == "cancel":  # a retrieve response: the lifecycle, never a consent status
                seen.append(Observation(flow_id(name), DETAIL, listed, listed, created_at=utc(created),
                                        lifecycle="cancelled", archived=True))  # fmt: skip
    for name, at in INCIDENTS:
        incident = {"id": f"incident-{name}", "taskType": "send-initiate-webhook", "taskCategory": "incident"}
        seen.append(event(name, "flow.incident", None, at, {"data": {"flowId": flow_id(name), "incident": incident}}))
    # A flow known only from a webhook event: no creation time, so in no range.
    seen.append(event("stub", "flow.status_changed", "Accepted", STUB_DECIDED))
    return seen


@pytest.fixture
def make_portal(make_app, database_url):
    """A portal in time zone `zone` whose clock says NOW, its index filled with FLOWS (or empty)."""

    def build(zone: str = "Europe/Oslo", filled: bool = True):
        app = make_app(database=database_url, WTF_CSRF_ENABLED=False, PORTAL_TIMEZONE=zone)
        app.extensions["portal.clock"] = NOW.timestamp
        if filled:
            with app.app_context():
                apply_observations(observations(), app.extensions["portal.settings"].index_key)
        return app

    return build


def viewer(app):
    client = app.test_client()
    assert sign_in(client, add_user(app, role="viewer")).status_code == 302
    return client


def figures(app, first: str, last: str, zone: str = "Europe/Oslo"):
    with app.app_context():
        result = insight(DateRange("custom", date.fromisoformat(first), date.fromisoformat(last), zone))
        db.session.remove()
        return result


def cell(page, kind: str, key: str, column: int = 0) -> str:
    """The text of the `column`th number cell of the table row data-`kind`="`key`"."""
    row = re.search(rf'<tr data-{kind}="{re.escape(key)}">(.*?)</tr>', page.text, re.S)
    assert row, f"no row {kind}={key}"
    return unescape(re.findall(r"<td[^>]*>([^<]*)</td>", row[1])[column])


def test_figures_of_a_known_set_of_flows(make_portal):
    result = figures(make_portal(), "2026-03-02", "2026-03-08")
    assert result.statuses == {"Unopened": 3, "Opened": 1, "Accepted": 2, "Rejected": 1, "unknown": 1}
    assert result.created == 8
    assert (result.opened, result.archived, result.cancelled) == (4, 2, 1)
    assert result.funnel == [("created", 8), ("opened", 4), ("Accepted", 2), ("Rejected", 1)]
    # Decided: 1 hour, 4 hours, 1 day. p90 by linear interpolation: 4 h + 0.8 × (24 h − 4 h) = 20 h.
    assert result.decided == 3
    assert result.median_seconds == pytest.approx(4 * 3600, abs=0.01)
    assert result.p90_seconds == pytest.approx(20 * 3600, abs=0.01)
    per_day = {day.day.isoformat(): (day.created, day.decided, day.incidents) for day in result.days}
    assert per_day == {
        "2026-03-02": (1, 1, 0),  # the decision of the flow created the day before counts on its own day
        "2026-03-03": (2, 1, 0),
        "2026-03-04": (0, 1, 1),  # the stub's decision (no creation time, still a decision); an incident at 23:59
        "2026-03-05": (1, 1, 1),  # … and one at 00:00 local
        "2026-03-06": (1, 0, 0),
        "2026-03-07": (1, 1, 0),  # 23:30 local
        "2026-03-08": (2, 0, 0),  # 00:30 local, 23:30 UTC the day before
    }


def test_the_page_shows_the_figures_with_a_table_beside_each_chart(make_portal):
    page = viewer(make_portal()).get(CUSTOM)
    assert page.status_code == 200
    assert cell(page, "status", "Accepted") == "2" and cell(page, "status", "Accepted", 1) == "25%"
    assert cell(page, "status", "unknown") == "1" and cell(page, "status", "all") == "8"
    assert (cell(page, "status", "archived"), cell(page, "status", "cancelled")) == ("2", "1")
    assert [cell(page, "step", step) for step in ("created", "opened", "Accepted", "Rejected")] == ["8", "4", "2", "1"]
    assert cell(page, "step", "opened", 1) == "50%" and cell(page, "step", "Rejected", 1) == "12.5%"
    assert cell(page, "figure", "median") == "4 hr" and cell(page, "figure", "p90") == "20 hr"
    assert [cell(page, "day", "2026-03-08", n) for n in range(3)] == ["2", "0", "0"]
    for chart in ("chart-status", "chart-funnel", "chart-created", "chart-decided", "chart-incidents"):
        for drawing, size in ((chart, "wide"), (f"{chart}-narrow", "narrow")):  # CSS shows one, by the screen's width
            svg = f'<svg id="{drawing}" class="chart chart-{size}" role="img" aria-labelledby="{drawing}-title"'
            assert svg in page.text
            assert f'<title id="{drawing}-title">' in page.text
    assert "style=" not in page.text and "<script>" not in page.text
    assert page.text.count("<caption>") == 4 and 'scope="row"' in page.text
    assert "Europe/Oslo" in page.text and "10 Mar 2026, 12:00 CET" in page.text  # the zone named, "now" in it


def test_numbers_are_written_the_way_the_reader_s_language_writes_them(make_portal):
    client = viewer(make_portal())
    client.post("/language", data={"language": "nb", "next": "/insights"})
    page = client.get(CUSTOM)
    assert cell(page, "step", "Rejected", 1).replace("\xa0", " ") == "12,5 %"


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Tokyo", "Asia/Kolkata", "Asia/Kathmandu"])
def test_days_are_the_configured_zone_s_days(make_portal, zone):
    """New York changes to summer time on 8 March 2026 (a 23-hour day); Tokyo is 9 hours ahead of UTC; Kolkata
    (+5:30) and Kathmandu (+5:45) start their days in the middle of a UTC hour."""
    app = make_portal(zone)
    # Around midnight in Kathmandu (18:15 UTC) and in Kolkata (18:30 UTC).
    extra = {f"around {at}": f"2026-03-05T{at}:00Z" for at in ("18:10", "18:20", "18:40")}
    with app.app_context():
        listed = [FlowSummary.from_json({"id": flow_id(name), "createdAt": at}) for name, at in extra.items()]
        apply_observations(
            [from_summary(item, False, NOW) for item in listed], app.extensions["portal.settings"].index_key
        )
    result = figures(app, "2026-03-02", "2026-03-08", zone)
    start = datetime(2026, 3, 2, tzinfo=ZoneInfo(zone))
    end = datetime(2026, 3, 9, tzinfo=ZoneInfo(zone))
    times = [utc(when) for when, _ in FLOWS.values()] + [datetime.fromisoformat(at) for at in extra.values()]
    created = [moment for moment in times if start <= moment < end]
    expected = Counter(moment.astimezone(ZoneInfo(zone)).date() for moment in created)
    assert {day.day: day.created for day in result.days if day.created} == dict(expected)
    assert result.created == len(created)
    decisions = [at for _, happenings in FLOWS.values() for kind, status, at in happenings
                 if kind in ("event", "list") and status in ("Accepted", "Rejected")] + [STUB_DECIDED]  # fmt: skip
    decided = Counter(utc(at).astimezone(ZoneInfo(zone)).date() for at in decisions if start <= utc(at) < end)
    assert {day.day: day.decided for day in result.days if day.decided} == dict(decided)


def test_today_starts_at_local_midnight(make_portal):
    app = make_portal()
    with app.app_context():
        apply_observations(
            [list_item("late evening", "Unopened", False, NOW)]  # already known: no change
            + [
                from_summary(
                    FlowSummary.from_json({"id": flow_id(name), "status": "Unopened", "createdAt": at}), False, NOW
                )
                for name, at in (("yesterday 23:30", "2026-03-09T22:30:00Z"), ("today 00:30", "2026-03-09T23:30:00Z"))
            ],
            app.extensions["portal.settings"].index_key,
        )
    page = viewer(app).get("/insights?range=today")
    assert "Flows created on 10 Mar 2026" in page.text
    assert cell(page, "status", "all") == "1" and cell(page, "day", "2026-03-10") == "1"


def test_an_empty_range_says_so_instead_of_drawing_empty_charts(make_portal):
    page = viewer(make_portal()).get("/insights?range=custom&from=2025-01-01&to=2025-01-31")
    assert page.status_code == 200
    assert 'data-testid="empty-state"' in page.text and "No flows created in this range." in page.text
    assert "<svg" not in page.text.split('data-testid="insights"')[1]


def test_an_empty_index(make_portal):
    app = make_portal(filled=False)
    for path in ("/insights", "/insights?range=today", "/insights?range=30d"):
        page = viewer(app).get(path)
        assert page.status_code == 200 and "No flows created in this range." in page.text
    with app.app_context():
        empty = insight(DateRange("7d", date(2026, 3, 4), date(2026, 3, 10), "Europe/Oslo"))
    assert (empty.created, empty.decided, empty.median_seconds, empty.p90_seconds) == (0, 0, None, None)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("range=x", "“x” is not a range the insights know"),
        ("range=custom&from=2026-02-30&to=2026-03-08", "From: “2026-02-30” is not a date; write it as YYYY-MM-DD."),
        ("range=custom&from=2026-03-02&to=8.3.2026", "To: “8.3.2026” is not a date"),
        ("range=custom&from=2026-03-08&to=2026-03-02", "The From date (8 Mar 2026) is after the To date (2 Mar 2026)"),
        ("range=custom&from=2026-03-02", "A custom range needs a To date (YYYY-MM-DD)."),
        ("range=custom&from=0001-01-01&to=2026-03-02", "From: 0001-01-01 is outside the dates the insights can show."),
        ("range=custom&from=2026-03-02&to=9999-12-31", "To: 9999-12-31 is outside the dates"),
        ("range=custom&from=%3Cscript%3E&to=2026-03-02", "From: “<script>” is not a date"),
        # days without a range, as an address written by hand or shared gives them: were ignored, silently (a walk)
        ("from=2026-13-45", "From: “2026-13-45” is not a date"),
        ("from=2026-03-08&to=2026-03-02", "The From date (8 Mar 2026) is after the To date (2 Mar 2026)"),
    ],
)
def test_a_range_that_cannot_be_used_is_named_and_the_last_7_days_shown(make_portal, query, message):
    page = viewer(make_portal()).get(f"/insights?{query}")
    assert page.status_code == 200
    problems = [unescape(text) for text in re.findall(r'data-testid="range-problem">([^<]+)<', page.text)]
    assert any(message in problem for problem in problems), problems
    assert "Flows created from 4 Mar 2026 to 10 Mar 2026" in page.text
    assert "<script>" not in page.text.split('data-testid="insights"')[1]
    if "from=" in query:  # a day typed stays in the form, to be put right; what a date field cannot show not (a new
        sent = dict(parse_qsl(query))  # user's walk: Chromium warned of 2026-13-01 put back into the field)
        typed = {name: unescape(value) for name, value in re.findall(r'name="(from|to)" value="([^"]*)"', page.text)}
        assert typed == {name: sent.get(name, "") if a_day(sent.get(name, "")) else "" for name in ("from", "to")}


@pytest.mark.parametrize(
    "query",
    [
        "from=15108695088",
        "to=811218-9876",
        "range=custom&from=2026-03-02&to=131052-308T",
        "range=15108695088",
        "range=custom&from=2026-03-02&from=15108695088&to=2026-03-08",  # a name given twice, the id second
    ],
)
def test_a_national_id_typed_as_a_day_is_not_shown_whole(make_portal, query):
    """Days without a range are now read, and what is not a day is quoted back: a national id pasted into the
    wrong field (or an address shared with one) was shown whole on the page (an attack), and stayed in the address.
    It is left out of the address, which says so; the rest of the address is kept."""
    staff = viewer(make_portal())
    answer = staff.get(f"/insights?{query}")
    assert answer.status_code == 302
    location = answer.headers["Location"]
    page = staff.get(location)
    assert page.status_code == 200
    assert "A national id was left out of the address" in unescape(page.text)
    for whole in ("15108695088", "811218-9876", "131052-308T"):
        assert whole not in page.text and whole not in location and whole[:6] not in location
    assert ("from=2026-03-02" in location) == ("from=2026-03-02" in query), "the other values are kept"


def a_day(value: str) -> bool:
    """Whether a date field can show `value`: a real day written YYYY-MM-DD."""
    try:
        return bool(re.fullmatch(r"\d{4}-\d{2}-\d{2}", value)) and date.fromisoformat(value) is not None
    except ValueError:
        return False


def test_a_custom_range_longer_than_366_days_is_shortened(make_portal):
    page = viewer(make_portal()).get("/insights?range=custom&from=2020-01-01&to=2026-03-08")
    assert "A custom range covers at most 366 days: showing 8 Mar 2025 to 8 Mar 2026." in unescape(page.text)
    assert "Flows created from 8 Mar 2025 to 8 Mar 2026" in page.text
    assert cell(page, "status", "all") == "9"  # all but the flow created on 9 March


def test_parse_range_presets_and_custom():
    today = date(2026, 3, 29)  # the day Oslo moves to summer time: 23 hours long
    span, problems = parse_range({}, today, "Europe/Oslo")
    assert (span.kind, span.first, span.last, problems) == ("7d", date(2026, 3, 23), today, [])
    span, _ = parse_range({"range": "today"}, today, "Europe/Oslo")
    assert (span.start, span.end) == (utc("2026-03-28 23:00"), utc("2026-03-29 22:00"))
    span, _ = parse_range({"range": "30d", "from": "junk"}, today, "Europe/Oslo")  # from/to only for custom
    assert (span.first, span.last) == (date(2026, 2, 28), today)


def test_percentile_is_postgresql_s_percentile_cont():
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.9) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0], 0.9) == 90.0


def test_insights_need_a_signed_in_user(make_portal):
    app = make_portal(filled=False)
    answer = app.test_client().get("/insights")
    assert answer.status_code == 302 and answer.headers["Location"].startswith("/login")
    page = viewer(app).get("/insights")
    assert page.status_code == 200 and 'aria-current="true" href="/insights">Insights</a>' in page.text


def test_presets_are_links_and_typed_days_always_make_a_custom_range(make_portal):
    """Days typed in are never ignored because a preset was left selected: the day form asks for a custom range."""
    page = viewer(make_portal()).get("/insights?range=30d").text
    assert '<a class="nav-link active" href="/insights?range=30d" aria-current="page">' in page
    assert 'href="/insights?range=today"' in page and 'href="/insights?range=7d"' in page
    day_form = page.split('<input type="hidden" name="range" value="custom">')
    assert len(day_form) == 2 and 'name="from"' in day_form[1] and 'name="range"' not in day_form[1]
