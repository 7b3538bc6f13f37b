"""Webhook events as staff see them: the filtered list and one event."""

import json
import re

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _

from ..extensions import db
from ..models import WebhookEvent
from ..paging import MAX_ROW_ID, before_argument
from ..webhooks.store import event_document, event_types, find_events

bp = Blueprint("events", __name__, url_prefix="/events")

PAGE_SIZE = 50
FILTER_VALUE = re.compile(r"[A-Za-z0-9._:-]{1,100}")


def _filters(args) -> tuple[dict, bool]:
    """The filters that are well formed, and whether any given one was not."""
    raw = {
        "type": args.get("type", "").strip(),
        "flow": args.get("flow", "").strip(),
        "before": args.get("before", "").strip(),
    }
    clean = {name: value for name, value in raw.items() if value and FILTER_VALUE.fullmatch(value)}
    if "before" in clean and before_argument(clean["before"]) is None:
        del clean["before"]
    return clean, len(clean) != len([value for value in raw.values() if value])


@bp.get("")
def index():
    """Received events, newest first, filtered by type and by flow id or referenceId."""
    filters, dropped = _filters(request.args)
    if dropped:
        flash(_("A filter value was not valid and was left out."), "warning")
        return redirect(url_for("events.index", **filters))
    page = find_events(
        event_type=filters.get("type"),
        flow=filters.get("flow"),
        before=before_argument(filters.get("before")),
        limit=PAGE_SIZE,
    )
    next_url = url_for("events.index", **(filters | {"before": page.next_before})) if page.next_before else None
    newest_url = url_for("events.index", **{k: v for k, v in filters.items() if k != "before"})
    return render_template(
        "events/index.html",
        page=page,
        filters=filters,
        types=event_types(),
        next_url=next_url,
        newest_url=newest_url if "before" in filters else None,
    )


@bp.get(f"/<int(max={MAX_ROW_ID}):event_row>")
def detail(event_row: int):
    """One event with its pretty-printed body and the headers that came with it."""
    event = db.session.get(WebhookEvent, event_row) or abort(404)
    return render_template(
        "events/detail.html", event=event, body=event_document(event), headers=json.loads(event.headers or "{}")
    )
