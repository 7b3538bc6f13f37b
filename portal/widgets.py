"""The widgets a list shows in every row (a status, a time, a flow id), built in Python.

Written as Jinja macros they were a third of a 10-row flow list's cost (call overhead, an escaping wrapper for
every value): here each value is escaped once and the markup joined as plain text. They are template globals
under the names the macros had; `templates/_macros.html` keeps the widgets that are not in every row.
"""

import re
from datetime import datetime
from functools import lru_cache

from flask import Flask
from markupsafe import Markup
from markupsafe import escape as e

from . import current
from .flowapi.records import CONSENT_STATUSES, LIFECYCLES, known_spelling
from .flowindex.status import FlowStatus, Reading
from .i18n import Words, request_words
from .i18n import gettext as _
from .labels import status_label
from .masking import mask_flow_id, mask_text
from .presentation import local_time, source_name, status_hint, status_tone, utc_time


def status_badge(status: str | None) -> Markup:
    """A consent status or lifecycle as a coloured badge, its code kept for scripts and tests. Read in another letter
    case or spelling ("ACCEPTED", "canceled") as the status it is, as the index reads it."""
    known = known_spelling(known_spelling(status, CONSENT_STATUSES), LIFECYCLES)
    return _built(
        f'<span class="badge status-badge tone-{e(status_tone(known))}" data-status-code="{_attribute(status)}">'
        f"{e(status_label(known))}</span>"
    )


def time_cell(moment: datetime | None, unread: str | None = None, seconds: bool = False) -> Markup:
    """A moment in the reader's time zone, exact in UTC on hover; `unread`: the service's own text for a time
    the portal could not read, shown as it came. `seconds`: where times in one list may share a minute."""
    if moment:
        return _built(_time_html(moment, seconds, request_words().language, current.settings().timezone))
    if unread:
        title = e(_("Not a time the portal can read"))
        return _built(f'<span class="font-monospace" title="{title}">{e(mask_text(unread))}</span>')
    return _built("—")


# The cells below are the same for every reader of a language (lists are read again and again): made once each.
@lru_cache(maxsize=4096)
def _time_html(moment: datetime, seconds: bool, language: str, zone: str) -> str:
    return (
        f'<time datetime="{e(moment.isoformat())}" title="{e(utc_time(moment))}">'
        f"{e(local_time(moment, seconds, request_words()))}</time>"
    )


def flow_id_cell(flow_id: str, href: str | None = None) -> Markup:
    """A flow id in a list: its first 8 characters shown, the whole id in its text (screen readers, find, copy)
    and on hover, and a Copy button (portal.js shows it; without JavaScript the id can still be selected).

    Shown masked like any text (`mask_flow_id`): a service (or a forged event) naming a flow by a national id must
    not show it; a UUID is left as it is."""
    return _built(_flow_id_html(mask_flow_id(flow_id), href, request_words().language))


@lru_cache(maxsize=4096)
def _flow_id_html(flow_id: str, href: str | None, language: str) -> str:
    whole, short = e(flow_id), e(flow_id[:8])
    cut = len(flow_id) > 8
    rest = f'<span class="visually-hidden">{e(flow_id[8:])}</span>' if cut else ""
    text = f'<code class="flow-id-text{" flow-id-cut" if cut else ""}" title="{whole}">{short}{rest}</code>'
    if href:
        text = f'<a href="{e(href)}">{text}</a>'
    copied, copy = e(_("Copied")), e(_("Copy"))  # outside the f-string, where pybabel extract finds them
    return (
        f'<span class="flow-id">{text}<button type="button" class="btn btn-outline-secondary copy-button" '
        f'data-copy="{whole}" data-copied="{copied}" hidden><span class="copy-label">{copy}</span>'
        f'<span class="visually-hidden"> {short}</span></button></span>'
    )


def flow_status(status: FlowStatus, explain: bool = False) -> Markup:
    """A flow's consent status, lifecycle and archived, each with where it came from and how long ago, in
    visible text (the exact time in UTC on hover). `status`: a portal.flowindex.status.FlowStatus.
    `explain`: add a sentence where the parts seem to disagree (the flow's page).

    A list shows the same few labels, badges and hints in every row: each is made (and escaped) once a
    request, through the request's Words."""
    said, now = request_words(), status.now
    shown = _status_part(said, said.gettext("Consent"), status.consent, now) + _status_part(
        said, said.gettext("Flow"), status.lifecycle, now
    )
    if status.archived.value:
        shown += _status_part(said, None, status.archived, now)
    consent, lifecycle = status.consent.value or "", status.lifecycle.value or ""
    html = (
        f'<span class="flow-status" data-testid="flow-status" data-consent="{said(_attribute, consent)}" '
        f'data-lifecycle="{said(_attribute, lifecycle)}" '
        f'data-archived="{"yes" if status.archived.value else "no"}">{shown}</span>'
    )
    sentence = _explanation(status) if explain else None
    if sentence:
        html += f'<p class="small text-body-secondary mb-0 mt-1" data-testid="status-explained">{e(sentence)}</p>'
    return _built(html)


def _status_part(said: Words, label: str | None, reading: Reading, now: datetime) -> str:
    """One part: its label (none for "Archived"), its badge, where it came from and how long ago."""
    # "archived": one flow's state (arkivert), not the tab of "Archived" flows (Arkiverte)
    opening = said(_part_opening, label, reading.value, said.gettext("archived"))
    title = ""
    if reading.at:
        title = f' title="{said(_escaped, said(source_name, reading.source))} · {e(utc_time(reading.at))}"'
    hint = said(_escaped, status_hint(reading, now, said))
    return f'{opening}<small class="status-source"{title}>({hint})</small></span>'


def _part_opening(label: str | None, value, archived: str) -> str:
    heading = f'<span class="status-label">{e(label)}</span> ' if label else ""
    text = status_label(value) if label else archived
    badge = f'<span class="badge status-badge tone-{e(status_tone(value))}">{e(text)}</span>'
    return f'<span class="status-part">{heading}{badge} '


def _escaped(text: str) -> str:
    return str(e(text))


def _attribute(code: str | None) -> str:
    """A status's code as an attribute: masked as its badge is (a service may put anything where a status goes)."""
    return str(e(mask_text(code)))


def _explanation(status: FlowStatus) -> str | None:
    if not status.consent.known:
        return _(
            "The Flow Service tells the consent status only in its flow list and in webhook events, and the "
            "portal has seen neither for this flow yet."
        )
    if status.answered_but_not_seen:
        return _(
            "The flow is completed, so the individual has answered, but the portal has not yet seen whether they "
            "accepted or rejected: the flow list and the flow's webhook events tell it."
        )
    if status.cancelled_before_consent:
        return _(
            "The flow was cancelled before the individual answered, so its consent status stays %(status)s.",
            status=status_label(status.consent.value),
        )
    return None


def breakable(code: str) -> Markup:
    """A code (an action, an event type) for a narrow column: escaped, free to break after its dots and underscores,
    where `account.sign_out_everywhere` or `flow.status_changed` otherwise widened a phone's table."""
    return _built(_BREAK_AFTER.sub(r"\g<0><wbr>", str(e(code))))


_BREAK_AFTER = re.compile(r"[._]")  # no character an escape writes: "&#39;" holds neither


def _built(html: str) -> Markup:
    """The markup a widget built: this module's own literals, every value in them passed through `e` on the way."""
    return Markup(html)  # noqa: S704 - the one place this module trusts a string; nothing unescaped reaches it


def init_app(app: Flask) -> None:
    for widget in (status_badge, time_cell, flow_id_cell, flow_status):
        app.add_template_global(widget)
    app.add_template_filter(breakable, "breakable")
