"""Insights: how consent is going over a chosen range of days, for every signed-in staff member."""

from datetime import datetime, timezone

from babel.dates import format_timedelta
from babel.numbers import format_percent
from flask import Blueprint, current_app, render_template, request
from flask_babel import get_locale

from ..insight_rollups import PRECISION
from ..insights import EXACT_PERCENTILE_DAYS, RANGES, insight, local_today, parse_range
from ..security import role_required

bp = Blueprint("insights", __name__, url_prefix="/insights")
# How a duration reads: the two largest units that matter (3 h 25 min, 2 d 4 h), each in the reader's language.
UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


@bp.get("")
@role_required("viewer")
def index():
    """Counts by status, the funnel, time to decision and per-day series for today, 7 or 30 days or custom days."""
    zone = current_app.extensions["portal.settings"].timezone
    now = datetime.fromtimestamp(current_app.extensions["portal.clock"](), timezone.utc)
    span, problems = parse_range(request.args, local_today(now, zone), zone)
    return render_template(
        "insights/index.html",
        insight=insight(span),
        problems=problems,
        now=now,
        ranges=RANGES,
        exact_days=EXACT_PERCENTILE_DAYS,
        precision=PRECISION,
    )


@bp.app_template_filter("percent")
def percent(fraction: float) -> str:
    """0.655 as "65.5%" / "65,5 %": one decimal at most, in the reader's language's own pattern."""
    return format_percent(round(fraction, 3), locale=get_locale(), decimal_quantization=False)


@bp.app_template_filter("duration")
def duration(seconds: float | None) -> str:
    """Seconds as the two largest units that are not zero, in the reader's language: "3 hr 25 min"."""
    if seconds is None:
        return "—"
    left, parts = round(seconds), []
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
