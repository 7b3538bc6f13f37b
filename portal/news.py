"""What a page left open asks in the background: the webhook events received after the row it showed up to.

A page says that row in its `data-watch` address (`?after=<row>`); static/js/page-news.js asks it every so often and
shows the answer's sentences with a button to reload (and goes on asking: the count grows as events come). The
answers read the portal's own store only.
"""

from functools import lru_cache

from flask import current_app, jsonify, request, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from werkzeug.routing import Map

from .labels import status_label
from .paging import MAX_ROW_ID
from .presentation import shown
from .webhooks.store import Arrivals

NAMED_TYPES = 5  # the new events' types a sentence names at most
# Asked by a page, not a person: they neither keep a session from its idle timeout nor end it (the page a person
# opens next says why it ended), signed out they answer 401 in JSON, not a sign-in page, and answered they are
# logged at DEBUG (every open page asks every 15 s).
BACKGROUND_ENDPOINTS = {"flows.heard", "events.heard"}


# Which page asks, for the words of its answer: a flow's, the events list, the flow list (`on=flows`).
A_FLOW, EVENTS, FLOW_LIST = "flow", "events", "flows"


def flow_list_heard_url(row: int) -> str:
    """The flow list's news address from `row` on, as url_for("events.heard", after=row, on="flows") builds it: the
    router asked once per app and script root, not on every load of the flow list (0.6 % of the page)."""
    return f"{_events_heard_path(current_app.url_map, request.script_root)}?after={row}&on={FLOW_LIST}"


@lru_cache(maxsize=8)
def _events_heard_path(_url_map: Map, _script_root: str) -> str:
    return url_for("events.heard")


def row_asked() -> int | None:
    """The row the asking page showed up to, or None when `after` is no row (a larger number than a row id holds
    failed the query on PostgreSQL: found by an attack)."""
    after = request.args.get("after", "")
    if after.isascii() and after.isdigit() and len(after) <= len(str(MAX_ROW_ID)) and int(after) <= MAX_ROW_ID:
        return int(after)
    return None


def not_a_row():
    message = _("The after parameter must be a whole number: the last event row the page showed.")
    return jsonify(error="bad_request", message=message), 400


def answer(arrived: Arrivals, page: str):
    """How many events came, and sentences naming their first types (masked, as pages show them) and, of a flow's,
    the consent status the newest of them says; `page` is the kind of page that asks."""
    return jsonify(new=arrived.count, message=_said(arrived, page) if arrived.count else None)


def _said(arrived: Arrivals, page: str) -> str:
    count = arrived.count
    named = ", ".join(shown(kind) if kind else _("no type") for kind in dict.fromkeys(arrived.types))  # once each
    named += "…" if count > len(arrived.types) else ""
    if page == A_FLOW:
        said = ngettext(
            "A webhook event arrived for this flow after this page was loaded (%(types)s).",
            "%(num)s webhook events arrived for this flow after this page was loaded (%(types)s).",
            count,
            types=named,
        )
    elif page == FLOW_LIST:  # of any flow: one on this page, or not (a re-check found "to see it" misleading)
        said = ngettext(
            "A webhook event arrived after this list was loaded (%(types)s): a flow's status may have changed.",
            "%(num)s webhook events arrived after this list was loaded (%(types)s): statuses may have changed.",
            count,
            types=named,
        )
        return said + " " + _("Reload the page to see the list as it is now.")
    else:
        said = ngettext(
            "A webhook event arrived after this page was loaded (%(types)s).",
            "%(num)s webhook events arrived after this page was loaded (%(types)s).",
            count,
            types=named,
        )
    if arrived.newest_status:
        said += " " + _("The newest says the consent status is %(status)s.", status=status_label(arrived.newest_status))
    return said + " " + ngettext("Reload the page to see it.", "Reload the page to see them.", count)


def signed_out():
    """A page's question after its session ended (signed out elsewhere, idle, its time limit): said as such."""
    return jsonify(error="signed_out", message=_("You were signed out. Sign in again to go on.")), 401
