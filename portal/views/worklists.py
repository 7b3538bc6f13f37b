"""Work lists for support staff: stuck flows, flows with open incidents, and the incident queue."""

import re
from datetime import datetime, timedelta
from typing import Any

from babel.dates import format_timedelta
from flask import Blueprint, flash, redirect, render_template, request, url_for
from flask_babel import get_locale
from flask_babel import gettext as _

from .. import current
from ..roles import role_required
from ..worklists import (
    COUNT_CAP,
    count_flows_with_open_incidents,
    count_stuck,
    flows_with_open_incidents,
    open_incident_groups,
    open_incidents,
    read_cursor,
    stuck_page,
)

bp = Blueprint("worklists", __name__, url_prefix="/insights")

PAGE_SIZE = 50
GROUP_PREVIEW = 10  # incidents shown under each group heading; the group's own page shows them all
PREVIEWED_GROUPS, LISTED_GROUPS = 20, 200  # groups with their incidents shown; groups named with a link
MAX_HOURS = 24 * 365
MISSING = "(none)"  # a group whose task type or category the service did not send
GROUP_VALUE = re.compile(r"[^\x00-\x1f\x7f]{1,100}")


def _now() -> datetime:
    """The portal's clock (`portal.clock`, moved on by tests) as an aware UTC time."""
    return current.now()


def _age(moment: datetime | None, now: datetime) -> str:
    """How long ago, without direction, in the reader's language: "3 days"."""
    if moment is None:
        return "—"
    return format_timedelta(max(now - moment, timedelta(0)), granularity="minute", locale=get_locale())


@bp.get("/stuck")
@role_required("viewer")
def stuck():
    """Flows not done and without change for longer than the set hours; and flows with open incidents."""
    args, problems = _stuck_args(request.args)
    if problems:
        return _without(problems, "worklists.stuck", args)
    now, hours = _now(), args.get("hours", current.settings().stuck_after_hours)
    stuck_after = timedelta(hours=hours)
    return render_template(
        "insights/stuck.html",
        hours=hours,
        args=args,
        stuck=stuck_page(now, stuck_after, read_cursor(args.get("after")), PAGE_SIZE),
        stuck_total=count_stuck(now, stuck_after),
        count_cap=COUNT_CAP,
        troubled=flows_with_open_incidents(read_cursor(args.get("incidents_after")), PAGE_SIZE),
        troubled_total=count_flows_with_open_incidents(),
        now=now,
        age=_age,
    )


@bp.get("/incidents")
@role_required("viewer")
def incidents():
    """Open incidents across flows, grouped by task type and category; one group's own page when one is chosen."""
    args, problems = _incident_args(request.args)
    if problems:
        return _without(problems, "worklists.incidents", args)
    groups, now = open_incident_groups(), _now()
    if "type" in args:
        kind, category = _group_value(args["type"]), _group_value(args["category"])
        page = open_incidents(kind, category, grouped=True, after=read_cursor(args.get("after")), limit=PAGE_SIZE)
        group = next((item for item in groups if (item.task_type, item.task_category) == (kind, category)), None)
        return render_template("insights/incident_group.html", group=group, page=page, args=args, now=now, age=_age)
    # A flood of odd task types must not make the page a query per group: the largest get previews, then names.
    previews = {(item.task_type, item.task_category): _preview(item) for item in groups[:PREVIEWED_GROUPS]}
    return render_template(
        "insights/incidents.html",
        groups=groups,
        total=sum(group.incidents for group in groups),
        previewed=groups[:PREVIEWED_GROUPS],
        listed=groups[PREVIEWED_GROUPS:LISTED_GROUPS],
        unlisted=max(len(groups) - LISTED_GROUPS, 0),
        previews=previews,
        now=now,
        age=_age,
    )


def _preview(group):
    return open_incidents(group.task_type, group.task_category, grouped=True, limit=GROUP_PREVIEW)


def _group_value(value: str) -> str | None:
    return None if value == MISSING else value


def group_args(task_type: str | None, task_category: str | None) -> dict:
    """The query arguments that choose one group of the incident queue."""
    return {
        "type": MISSING if task_type is None else task_type,
        "category": MISSING if task_category is None else task_category,
    }


def _stuck_args(raw) -> tuple[dict, list[str]]:
    """`hours` (a whole number of hours) and the two lists' positions, each dropped with a message when unusable."""
    args, problems = {}, []
    hours = raw.get("hours", "").strip()
    if hours:
        if hours.isascii() and hours.isdigit() and 1 <= int(hours) <= MAX_HOURS:
            args["hours"] = int(hours)
        else:
            problems.append(_("Hours without change must be a whole number from 1 to %(most)d.", most=MAX_HOURS))
    for name in ("after", "incidents_after"):
        _keep_cursor(raw, name, args, problems)
    return args, problems


def _incident_args(raw) -> tuple[dict, list[str]]:
    args: dict[str, Any] = {}
    problems: list[str] = []
    kind, category = raw.get("type"), raw.get("category")
    if kind is not None or category is not None:
        if GROUP_VALUE.fullmatch(kind or "") and GROUP_VALUE.fullmatch(category or ""):
            args |= {"type": kind, "category": category}
        else:
            problems.append(_("That incident group cannot be read; showing every group."))
    if "type" in args:
        _keep_cursor(raw, "after", args, problems)
    return args, problems


def _keep_cursor(raw, name: str, args: dict, problems: list[str]) -> None:
    value = raw.get(name)
    if value is None:
        return
    if read_cursor(value):
        args[name] = value
    else:
        problems.append(_("That page position is not valid; showing the first page."))


def _without(problems: list[str], endpoint: str, args: dict):
    """Say which values could not be used, and show the page without them."""
    for problem in dict.fromkeys(problems):
        flash(problem, "warning")
    return redirect(url_for(endpoint, **args))


@bp.app_context_processor
def worklist_helpers():
    return {"incident_group_args": group_args}
