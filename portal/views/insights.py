"""Insights: how consent is going over a chosen range of days, for every signed-in staff member."""

from functools import cache
from typing import Literal
from urllib.parse import urlencode

from babel import Locale
from babel.dates import format_timedelta
from babel.numbers import format_decimal, format_percent
from flask import Blueprint, flash, g, redirect, render_template, request, url_for
from flask_babel import get_locale
from flask_babel import gettext as _

from .. import current
from ..flowindex.observations import CONSENT_STATUSES
from ..flowlinks import hidden_in_urls
from ..insight_rollups import PRECISION
from ..insights import EXACT_PERCENTILE_DAYS, RANGES, asked_range, insight, iso_day, local_today, parse_range
from ..labels import status_label
from ..presentation import local_date
from ..roles import role_required

bp = Blueprint("insights", __name__, url_prefix="/insights")
# How a duration reads: the two largest units that matter (3 h 25 min, 2 d 4 h), each in the reader's language.
UNITS: tuple[tuple[Literal["day", "hour", "minute", "second"], int], ...] = (
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
    ("second", 1),
)


def _a_day_or_nothing(value: str) -> str:
    """A day as a date field holds it (YYYY-MM-DD), or nothing: a browser shows no other value, and says so in its
    console (a new user's walk: 2026-13-01 put back into the field)."""
    day = iso_day(value)
    return day.isoformat() if day else ""


@bp.get("")
@role_required("viewer")
def index():
    """Counts by status, the funnel, time to decision and per-day series for today, 7 or 30 days or custom days."""
    if any(hidden_in_urls(value) for _name, value in request.args.items(multi=True)):  # a repeated name's too
        return _without_national_ids()
    zone = current.settings().timezone
    now = current.now()
    span, problems = parse_range(request.args, local_today(now, zone), zone)
    figures = insight(span)
    typed = {"from": span.first.isoformat(), "to": span.last.isoformat()}
    if span.kind != "custom" and asked_range(request.args) == "custom":  # shown instead: kept to correct
        typed = {name: _a_day_or_nothing(request.args.get(name, "")) for name in typed}
    return render_template(
        "insights/index.html",
        insight=figures,
        day_names={day.day: local_date(day.day) for day in figures.days},  # once: three charts and a table use them
        status_names={code: status_label(code) for code in CONSENT_STATUSES} | {"unknown": _("Status not known")},
        all_created=percent(1),  # the created row is the whole, written as the reader's language writes 100 %
        problems=problems,
        typed=typed,
        now=now,
        ranges=RANGES,
        exact_days=EXACT_PERCENTILE_DAYS,
        precision=PRECISION,
    )


def _without_national_ids():
    """The same address without the values that read as a national id (pasted into a day, or a shared address):
    an address never keeps one (the flow and events lists seal theirs; here they have no use)."""
    flash(_("A national id was left out of the address: the insights take days, written YYYY-MM-DD."), "warning")
    kept = [(name, value) for name, value in request.args.items(multi=True) if not hidden_in_urls(value)]
    return redirect(url_for("insights.index") + ("?" + urlencode(kept) if kept else ""))


@bp.app_template_global("day_bar_layout")
def day_bar_layout(days, attribute: str, plot_w: float, plot_h: float, left: float, top: float, names: dict):
    """The per-day chart's scale and each bar's geometry as SVG numbers (x, y, width, height, label x, label y, day,
    count): worked out here, as a year's three charts draw 1,095 bars (Jinja arithmetic cost ~60 ms a page)."""
    counts = [getattr(day, attribute) for day in days]
    scale = max([*counts, 1])
    slot = plot_w / max(len(days), 1)
    bars = []
    for index, (day, count) in enumerate(zip(days, counts, strict=True)):
        x, bar_h = left + index * slot + slot * 0.15, count / scale * plot_h
        y = top + plot_h - bar_h
        bars.append((f"{x:.2f}", f"{y:.2f}", f"{slot * 0.7:.2f}", f"{bar_h:.2f}", f"{x + slot * 0.35:.2f}",
                     f"{y - 3:.2f}", names[day.day], count))  # fmt: skip
    return scale, bars


@bp.app_template_filter("count_number")
def count_number(value: int) -> str:
    """A count as the reader's language writes it ("12 500"), as the number filter does but fast: a year's page
    writes over 2,000 of them (Babel takes ~50 µs each; grouping digits by the locale's own symbol takes 1)."""
    if "count_group" not in g:  # the reader's locale, looked up once a request
        g.count_group = _plain_grouping(str(get_locale()))
    group = g.count_group
    if group is None or not isinstance(value, int) or value < 0:
        return format_decimal(value, locale=get_locale())
    return f"{value:,}".replace(",", group)


@cache
def _plain_grouping(locale: str) -> str | None:
    """The locale's group symbol when it groups every three digits from the first thousand on, else None."""
    group = Locale.parse(locale).number_symbols["latn"]["group"]
    plain = all(f"{n:,}".replace(",", group) == format_decimal(n, locale=locale) for n in (999, 1234, 1234567))
    return group if plain else None


@bp.app_template_filter("percent")
def percent(fraction: float) -> str:
    """0.655 as "65.5%" / "65,5 %": one decimal at most, in the reader's language's own pattern."""
    return format_percent(round(fraction, 3), locale=get_locale(), decimal_quantization=False)


@bp.app_template_filter("duration")
def duration(seconds: float | None) -> str:
    """Seconds as the two largest units that are not zero, in the reader's language: "3 hr 25 min"."""
    if seconds is None:
        return "—"
    left = round(seconds)
    parts: list[str] = []
    for unit, size in UNITS:
        if left >= size or (unit == "second" and not parts):
            amount, left = divmod(left, size)
            parts.append(
                format_timedelta(amount * size, granularity=unit, threshold=10**9, format="short", locale=get_locale())
            )
        elif parts:
            break
        if len(parts) == 2:
            break
    return " ".join(parts)
