"""What a page left open asks in the background: the webhook events received after the row it showed up to.

A page says that row in its `data-watch` address (`?after=<row>`); static/js/page-news.js asks it every so often and
shows the answer's sentence with a button to reload. The answers read the portal's own store only.
"""

from flask import jsonify, request
from flask_babel import gettext as _
from flask_babel import ngettext

from .presentation import shown

LONGEST_ROW_DIGITS = 18  # a row id a database's 64-bit integer holds
NAMED_TYPES = 5  # the new events' types a sentence names at most


def row_asked() -> int | None:
    """The row the asking page showed up to, or None when `after` is no row."""
    after = request.args.get("after", "")
    if after.isascii() and after.isdigit() and len(after) <= LONGEST_ROW_DIGITS:
        return int(after)
    return None


def not_a_row():
    message = _("The after parameter must be a whole number: the last event row the page showed.")
    return jsonify(error="bad_request", message=message), 400


def answer(count: int, types: list[str | None], of_a_flow: bool):
    """How many events came, and a sentence naming their first types (masked, as pages show them)."""
    return jsonify(new=count, message=_said(count, types, of_a_flow) if count else None)


def _said(count: int, types: list[str | None], of_a_flow: bool) -> str:
    named = ", ".join(shown(kind) if kind else _("no type") for kind in dict.fromkeys(types))  # once, as received
    named += "…" if count > len(types) else ""
    if of_a_flow:
        return ngettext(
            "A webhook event arrived for this flow after this page was loaded (%(types)s). Reload the page to see it.",
            "%(num)s webhook events arrived for this flow after this page was loaded (%(types)s). Reload the page "
            "to see them.",
            count,
            types=named,
        )
    return ngettext(
        "A webhook event arrived after this page was loaded (%(types)s). Reload the page to see it.",
        "%(num)s webhook events arrived after this page was loaded (%(types)s). Reload the page to see them.",
        count,
        types=named,
    )
