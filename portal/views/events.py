"""Webhook events as staff see them: the filtered list and one event."""

import json
import re
from urllib.parse import urlencode

from flask import Blueprint, abort, flash, jsonify, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l
from flask_login import current_user

from .. import news
from ..access_log import record_event_access
from ..audit import record_audit
from ..csvexport import csv_response
from ..flowindex.gapcheck import unknown_flows
from ..flowindex.observations import lifecycle_told
from ..flowindex.search import SHORTEST_ID_START, flow_named, references_ending_in
from ..flowlinks import from_url_form, hidden_in_urls, left_untidy, sent_whole, url_form
from ..flowsearch import LEFT_OUT as LEFT_OUT_CATEGORY
from ..flowsearch import left_out_messages
from ..masking import mask_flow_id
from ..models import WebhookEvent, utc_now
from ..paging import MAX_ROW_ID, before_argument
from ..security import asked_here
from ..webhooks.store import (
    event_by_row,
    event_document,
    event_types,
    find_events,
    iter_matching_events,
    matching_events_after,
    reference_links,
)

bp = Blueprint("events", __name__, url_prefix="/events")

PAGE_SIZE = 50
FILTER_VALUE = re.compile(r"[A-Za-z0-9._:-]{1,100}")
MAX_TYPE = 100  # webhook_events.event_type


def _filters(args) -> tuple[dict, list[str]]:
    """The filters that are well formed, and the names of those given that were not."""
    raw = {
        "type": args.get("type", "").strip(),
        "flow": _flow_filter(args.get("flow", "").strip()),
        "unlinked": args.get("unlinked", "").strip(),
        "before": args.get("before", "").strip(),
    }
    clean = {name: value for name, value in raw.items() if value and _well_formed(name, value)}
    if hidden_in_urls(clean.get("type", "")):  # no event type reads as a national id: one typed by mistake
        del clean["type"]
    if "before" in clean and before_argument(clean["before"]) is None:
        del clean["before"]
    if clean.get("unlinked") == "0":
        del clean["unlinked"]  # "not only the unlinked ones": the default
        raw["unlinked"] = ""
    if clean.get("unlinked", "1") != "1":
        del clean["unlinked"]
    return clean, [name for name, value in raw.items() if value and name not in clean]


# What a person is told of a filter left out, by its name; a bad `unlinked` comes only from an edited address.
LEFT_OUT = {
    "flow": _l(
        "The flow id or reference was left out: it takes letters, digits and . _ : - as a flow's page shows them "
        "(e.g. LA-10042), with no spaces."
    ),
    "type": _l("The event type was left out: it was not one the list can show."),
    "before": _l("That page of older events was not found, so the newest are shown."),
}


# The filters whose message is said under them, tied to the field (a keyboard walk: said at the top of the page, it
# left the focus there and the field unmarked); a bad `before` or `unlinked` is said at the top.
TIED = ("flow", "type")


def _say_left_out(names: list[str]) -> None:
    for name in names:
        said = str(LEFT_OUT[name]) if name in LEFT_OUT else _("A filter value was not valid and was left out.")
        flash(said, f"{LEFT_OUT_CATEGORY}{name}" if name in TIED else "warning")


def _well_formed(name: str, value: str) -> bool:
    """A type as the store keeps it (any printable text: the list offers every type received); the others plain."""
    if name == "type":
        return len(value) <= MAX_TYPE and value.isprintable()
    return bool(FILTER_VALUE.fullmatch(value))


def _flow_filter(text: str) -> str:
    """A flow id or reference as links carry it (sealed when it reads as a national id: `flowlinks`); a seal this
    portal did not make stays as sent, and is left out as not valid."""
    return from_url_form(text) or text


def _in_url(filters: dict) -> dict:
    """The filters as a link carries them."""
    return filters | {"flow": url_form(filters["flow"])} if "flow" in filters else filters


def _valid_filters():
    """The request's filters, or a redirect to the same list without the ones that are not valid."""
    filters, dropped = _filters(request.args)
    if dropped:
        _say_left_out(dropped)
    elif not (_typed_whole(filters) or left_untidy(request.args, {"unlinked": "0"})):  # the form's empty fields
        return filters, None
    assert request.endpoint is not None  # a view is answering
    return filters, redirect(url_for(request.endpoint, **_in_url(filters)))


def _typed_whole(filters: dict) -> bool:
    """Whether the flow filter reads as a national id and was sent as typed, not sealed: out of the address with it."""
    return sent_whole(filters.get("flow", ""), request.args.get("flow", ""))


def _search(filters: dict) -> dict:
    return {"event_type": filters.get("type"), "flow": filters.get("flow"), "unlinked": "unlinked" in filters}


def _flow_id_started(filters: dict) -> str | None:
    """The whole id of the one flow whose id the flow filter starts, as the lists show ids cut to eight characters
    (`26028eb9`: no events matched, and nothing said why; a new user's walk); None for anything else."""
    typed = filters.get("flow")
    if not typed or "before" in filters:
        return None
    named = flow_named(typed)
    return named if named and len(named) > len(typed) and named.lower().startswith(typed.lower()) else None


@bp.get("")
def index():
    """Received events, newest first, filtered by type, by flow id or reference, or to the unlinked ones."""
    filters, refused = _valid_filters()
    if refused:
        return refused
    page = find_events(**_search(filters), before=before_argument(filters.get("before")), limit=PAGE_SIZE)
    if not page.rows and (whole := _flow_id_started(filters)):
        return redirect(url_for("events.index", **_in_url(filters | {"flow": whole})))
    next_url = url_for("events.index", **_in_url(filters | {"before": page.next_before})) if page.next_before else None
    unpaged = {name: value for name, value in filters.items() if name != "before"}
    left_out = {name: said for name, said in left_out_messages().items() if name in TIED}
    return render_template(
        "events/index.html",
        left_out=left_out,
        tied_fields=set(left_out),
        page=page,
        links=reference_links(page.rows),
        told={event.id: lifecycle_told(event_document(event)) for event in page.rows},
        unknown=unknown_flows(event.flow_id for event in page.rows),
        filters=filters,
        types=_types_offered(filters.get("type")),
        next_url=next_url,
        newest_url=url_for("events.index", **_in_url(unpaged)) if "before" in filters else None,
        # the first page hears of newer events (the rows are newest first); an older page is history
        watch_url=None if "before" in filters else _watch_url(unpaged, page.rows[0].id if page.rows else 0),
        export_url=url_for("events.export", **_in_url(unpaged)),
        meant=_references_meant(unpaged) if not page.rows else [],
        too_short=not page.rows and _too_short_for_an_id(filters.get("flow")),
    )


def _references_meant(filters: dict) -> list[tuple[str, str]]:
    """For a flow filter of digits that found nothing, the references it ends ("LA-10038" for "10038"), each with
    the address of these events filtered by it: staff type the number a customer reads out."""
    typed = filters.get("flow")
    if not typed:
        return []
    return [
        (reference, url_for("events.index", **_in_url(filters | {"flow": reference})))
        for reference, _flow_id in references_ending_in(typed)
    ]


def _too_short_for_an_id(typed: str | None) -> bool:
    """Fewer characters than a flow id is found by (its first eight, as the lists show it): "74749" matched nothing
    and nothing said why (a new user's walk)."""
    return typed is not None and 0 < len(typed) < SHORTEST_ID_START


@bp.get("/heard")
def heard():
    """What the list's first page, left open, asks in the background (portal/news.py): the events its filters
    match received after the row it showed up to. The flow list's first page asks it too (`on=flows`, no filters)."""
    filters, dropped = _filters(request.args)
    row = news.row_asked()
    if row is None:
        return news.not_a_row()
    if dropped:
        return jsonify(error="bad_request", message=_("A filter value was not valid and was left out.")), 400
    asking = news.FLOW_LIST if request.args.get("on") == news.FLOW_LIST else news.EVENTS  # the flow list asks here too
    return news.answer(matching_events_after(**_search(filters), row=row, most=news.NAMED_TYPES), asking)


def _watch_url(filters: dict, shown_up_to: int) -> str:
    return url_for("events.heard", **_in_url(filters), after=shown_up_to)


def _types_offered(chosen: str | None) -> list[str]:
    """The types received so far that can be chosen, and the chosen one if none has come yet (a bookmark may name a
    type before its first event): the filter must show what the list is filtered by. A type that reads as a national
    id (never shown whole, nor put in an address) or holds an invisible character is not offered."""
    types = [kind for kind in event_types() if _well_formed("type", kind) and not hidden_in_urls(kind)]
    return sorted([*types, chosen]) if chosen and chosen not in types else types


EXPORT_COLUMNS = ("event_id", "type", "flow_id", "reference_id", "status", "occurred_at", "received_at")


@bp.get("/export.csv")
@asked_here
def export():
    """The filtered events as CSV, every page of them, streamed; each export is audited.

    No bodies: a body may carry a national id, and these columns are what staff compare.
    """
    filters, dropped = _filters(request.args)
    if dropped:  # export nothing that was not asked for: back to the list, which says what was left out
        _say_left_out(dropped)
        return redirect(url_for("events.index", **_in_url(filters)))
    if _typed_whole(filters):
        return redirect(url_for("events.export", **_in_url(filters)))
    filters.pop("before", None)
    audited = {name: mask_flow_id(value) for name, value in filters.items()}
    record_audit(current_user.username, "export_events", urlencode(audited) or "all events")
    rows = (_export_row(event) for event in iter_matching_events(**_search(filters)))
    return csv_response(f"events-{utc_now():%Y%m%d-%H%M%S}.csv", EXPORT_COLUMNS, rows)


def _export_row(event: WebhookEvent) -> tuple:
    occurred = event.occurred_at or event.occurred_at_raw  # a time the portal cannot read, as it was sent
    return (
        event.event_id,
        event.event_type,
        event.flow_id,
        event.reference_id,
        event.status,
        occurred,
        event.received_at,
    )


@bp.get(f"/<int(max={MAX_ROW_ID}):event_row>")
def detail(event_row: int):
    """One event with its pretty-printed body and the headers that came with it."""
    event = event_by_row(event_row) or abort(404)
    record_event_access(event.flow_id, event.body, f"event {event.id}")
    body = event_document(event)
    return render_template(
        "events/detail.html",
        event=event,
        body=body,
        told=lifecycle_told(body),
        headers=json.loads(event.headers or "{}"),
        unknown=unknown_flows([event.flow_id]),
    )
