"""How values look to a person: masked national ids, local times, status badges."""

import json
import re
from datetime import date, datetime, timedelta, timezone
from functools import cache, lru_cache
from urllib.parse import quote
from zoneinfo import ZoneInfo

from babel import Locale
from babel.dates import TIMEDELTA_UNITS, format_date, format_time, format_timedelta
from flask import Flask, current_app, g, request, url_for
from flask_babel import format_number, get_locale
from flask_babel import lazy_gettext as _l

from . import current
from .flowapi import FLOW_ID
from .flowlinks import back_to_this_page, return_address, url_form
from .i18n import Words, request_words, translated
from .i18n import gettext as _
from .labels import (
    access_kind_label,
    access_target_label,
    action_label,
    audit_action_label,
    purpose_label,
    record_kind_label,
    role_label,
    status_label,
)
from .masking import hide_url_passwords, mask_document, mask_flow_id, mask_national_id, mask_text

STATUS_TONES = {
    "Unopened": "neutral",
    "Opened": "info",
    "Accepted": "success",
    "Rejected": "danger",
    "active": "info",
    "completed": "success",
    "cancelled": "neutral",
}
JUST_NOW = timedelta(seconds=5)

# Where the index learnt something about a flow (portal.flowindex.observations' sources).
SOURCE_NAMES = {
    "create": _l("created in the portal"),
    "list": _l("the flow list"),
    "detail": _l("the flow's page"),
    "webhook": _l("a webhook event"),
    # Said without the command's name: staff read these beside every status, and `flows sync` is an administrator's.
    "sync": _l("a sync with the Flow Service"),
    "sync_detail": _l("a sync with the Flow Service, flow by flow"),
}


def source_name(source: str | None) -> str:
    """A source of the flow index as a person reads it."""
    return translated(SOURCE_NAMES[source]) if source in SOURCE_NAMES else source or "—"


def pretty_json(document) -> str:
    """The document as indented JSON for a page, the characters a reader cannot see named (as `shown` does)."""
    return with_unseen_named(json.dumps(document, indent=2, ensure_ascii=False, sort_keys=True))


def masked_for_a_page(text):
    """`mask_text` as pages use it: a text's id-shaped numbers masked and its unseen characters named (a reference in
    a right-to-left override, "AL-\u202e56\u202c", read "AL-65" in the list and the flow's heading: a stand-in)."""
    masked = mask_text(text)
    return with_unseen_named(masked) if isinstance(masked, str) else masked


def _in_zone(moment: datetime, zone) -> datetime:
    """The moment in `zone`; at the ends of the calendar (9999-12-31 UTC) it stays as it is."""
    try:
        return moment.astimezone(zone)
    except (OverflowError, ValueError):
        return moment


# English pages are read by staff in the Nordics: day before month and a 24-hour clock (en_GB), not en_US.
FORMAT_LOCALES = {"en": "en_GB"}


def _format_locale() -> Locale:
    return _locale_named(str(get_locale() or "en"))


@cache
def _locale_named(language: str) -> Locale:
    """Parsed once per language: a page formats a time in every row."""
    return Locale.parse(FORMAT_LOCALES.get(language, language))


def local_time(moment: datetime | None, seconds: bool = False, words: Words | None = None) -> str:
    """A moment as the reader's language writes it, in the portal's time zone, zone named: "24 Nov 2026, 12:58 CET".

    `seconds`: for times that may lie within one minute of each other (a timeline, events).
    """
    if moment is None:
        return "—"
    return _local_time(moment, seconds, (words or request_words()).language, current.settings().timezone)


@lru_cache(maxsize=4096)
def _local_time(moment: datetime, seconds: bool, language: str, zone: str) -> str:
    """Kept: a list shows the same times to everyone who opens it, and formatting one costs tens of microseconds."""
    here = _in_zone(moment, ZoneInfo(zone))
    locale = _locale_named(language)
    day = _formatted_day(here.date(), str(locale))
    clock = format_time(here, "medium" if seconds else "short", locale=locale)
    return f"{locale.datetime_formats['medium'].format(clock, day)} {here.tzname() or ''}".rstrip()


@lru_cache(maxsize=4096)
def _formatted_day(day: date, locale: str) -> str:
    """A day as `local_time` writes it (a list's rows mostly share a few days)."""
    return format_date(day, "medium", locale=Locale.parse(locale))


def local_date(day: date) -> str:
    """A calendar day as the reader's language writes it: "8 Mar 2026", "8. mars 2026", "8.3.2026"."""
    return format_date(day, "medium", locale=_format_locale())


def seconds_needed(moments) -> bool:
    """Whether two of the moments fall in the same minute, so that a list of them needs seconds to read apart."""
    minutes = [moment.replace(second=0, microsecond=0) for moment in moments if moment is not None]
    return len(set(minutes)) < len(minutes)


def utc_time(moment: datetime | None) -> str:
    if moment is None:
        return ""
    return _utc_time(moment)


@lru_cache(maxsize=4096)
def _utc_time(moment: datetime) -> str:
    return _in_zone(moment, timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


# What werkzeug's converters leave unquoted in a path segment (BaseConverter.to_url).
PATH_SEGMENT_SAFE = "!$&'()*+,/:;=@"


def flow_url(flow_id) -> str:
    """A flow's page, as url_for("flows.detail", flow_id=...) builds it: the router asked once a request, not
    once a row of a list."""
    prefix = g.get("_flow_url_prefix")
    if prefix is None:
        prefix = g._flow_url_prefix = url_for("flows.detail", flow_id="-")[:-1]
    return prefix + _path_segment(url_form(str(flow_id)))


def openable_flow_id(value) -> bool:
    """Whether a flow page can be opened by this id (`{% if id is openable_flow_id %}`): an event may name its flow
    by anything, and a link that can only lead to "not found" is worse than the id shown as text."""
    return isinstance(value, str) and FLOW_ID.fullmatch(value) is not None


@lru_cache(maxsize=4096)
def _path_segment(text: str) -> str:
    return quote(text, safe=PATH_SEGMENT_SAFE)


def status_tone(status: str | None) -> str:
    return STATUS_TONES.get(status or "", "neutral")


def time_ago(moment: datetime, now: datetime, words: Words | None = None) -> str:
    """How long before `now` the moment was, in the page's language: "2 min. ago"."""
    words = words or request_words()
    if moment > now - JUST_NOW:
        return words.gettext("just now")
    key = (*_rounded_delta((moment - now).total_seconds()), words.language)
    text = _AGO_TEXTS.get(key)
    if text is None:
        if len(_AGO_TEXTS) >= 4096:
            _AGO_TEXTS.clear()
        text = _AGO_TEXTS[key] = format_timedelta(
            moment - now, threshold=AGO_THRESHOLD, add_direction=True, format="short", locale=get_locale()
        )
    return text


AGO_THRESHOLD = 0.85  # babel's default: "1 hour" from 51 minutes on
_AGO_TEXTS: dict[tuple[bool, str, int, str], str] = {}


def _rounded_delta(seconds: float) -> tuple[bool, str, int]:
    """All that babel's `format_timedelta` words depend on, found the way it finds them: the direction, the unit
    and the rounded count. A list's status hints say "2 min. ago" again and again; each wording is made once."""
    for unit, seconds_per_unit in TIMEDELTA_UNITS:
        value = abs(seconds) / seconds_per_unit
        if value >= AGO_THRESHOLD or unit == "second":
            if unit == "second" and value > 0:
                value = max(1, value)
            return seconds >= 0, unit, int(round(value))
    raise AssertionError("the last unit is seconds")  # pragma: no cover


def status_hint(reading, now: datetime, words: Words | None = None) -> str:
    """Where a part of a flow's status came from and how long ago it was true: "a webhook event, 2 min. ago"."""
    words = words or request_words()
    if not reading.known:
        return words.gettext("not known yet")
    source = words(source_name, reading.source)
    if reading.at is None:
        return source
    return words.gettext("%(source)s, %(when)s") % {"source": source, "when": time_ago(reading.at, now, words)}


QUOTED = 100  # characters of a value the service sent that a sentence quotes (an id the portal cannot use)


def quoted(value: str) -> str:
    """A value the service sent, shown (masked first: cut first, an id across the cut would not mask) and cut to
    QUOTED characters for a sentence."""
    text = shown(value)
    return text if len(text) <= QUOTED else text[: QUOTED - 1] + "…"


def shown(value) -> str:
    """A value as text for a page: "—" for a missing one, national ids in it masked, unseen characters named."""
    if value is None or value == "":
        return "—"
    if isinstance(value, bool):
        return _("Yes") if value else _("No")
    return with_unseen_named(hide_url_passwords(mask_text(str(value))))


# Characters a reader cannot see that change what the text around them seems to say: control characters, the
# zero-width space and word joiners (two types that look alike), and the bidirectional marks, embeddings,
# overrides and isolates (U+202E shows "flow.detpecca" as "flow.accepted"). Joiners that letters and emoji need
# (U+200C, U+200D) are left alone.
_UNSEEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def with_unseen_named(text: str) -> str:
    """`text` with each unseen character written as its code point, e.g. `[U+202E]`."""
    return _UNSEEN.sub(lambda unseen: f"[U+{ord(unseen[0]):04X}]", text)


FRAGMENTS_KEPT = 256
# The menu's entries, and the part of the portal each stands for besides its own page (by blueprint).
MENU_ENTRIES = (
    "flows.index",
    "flows.new",
    "events.index",
    "insights.index",
    "admin.users",
    "admin.audit",
    "admin.rejected",
    "admin.gaps",
    "admin.access",
    "admin.subjects",
    "admin.notifications",
)
MENU_SECTIONS = {
    "flows": "flows.index",
    "events": "events.index",
    "insights": "insights.index",
    "worklists": "insights.index",
}


def menu_entry_here() -> str | None:
    """The menu entry of the part of the portal this page belongs to (marked as the current one), if any."""
    endpoint = request.endpoint or ""
    return endpoint if endpoint in MENU_ENTRIES else MENU_SECTIONS.get(request.blueprint or "")


def cached_fragment(*key, caller):
    """`{% call cached_fragment(name, ...) %}...{% endcall %}`: the block rendered once per key and language.

    For parts of a page that are the same for every reader of a language and cost much to render (a form
    full of translated choices). The key must name everything else the block depends on; never a person's data.
    """
    fragments = current_app.extensions["portal.fragments"]
    key = (str(get_locale()), *key)
    html = fragments.get(key)
    if html is None:
        if len(fragments) >= FRAGMENTS_KEPT:
            fragments.clear()
        html = fragments[key] = caller()
    return html


def init_app(app: Flask) -> None:
    app.add_template_filter(mask_national_id, "mask")
    app.add_template_filter(local_time, "localtime")
    app.add_template_filter(utc_time, "utctime")
    app.add_template_filter(flow_url, "flow_url")
    app.add_template_filter(url_form, "in_url")
    app.add_template_filter(return_address, "return_address")
    app.add_template_test(openable_flow_id, "openable_flow_id")
    app.add_template_filter(status_tone, "tone")
    app.add_template_filter(shown, "shown")
    app.add_template_filter(source_name, "source_name")
    app.add_template_filter(pretty_json, "pretty_json")
    app.add_template_filter(mask_document, "mask_personal")
    app.add_template_filter(masked_for_a_page, "mask_text")
    app.add_template_filter(mask_flow_id, "mask_flow_id")
    app.add_template_filter(status_hint, "status_hint")
    app.add_template_filter(status_label, "status_label")
    app.add_template_filter(action_label, "action_label")
    app.add_template_filter(audit_action_label, "audit_action_label")
    app.add_template_filter(access_kind_label, "access_kind_label")
    app.add_template_filter(access_target_label, "access_target_label")
    app.add_template_filter(record_kind_label, "record_kind_label")
    app.add_template_filter(role_label, "role_label")
    app.add_template_filter(purpose_label, "purpose_label")
    app.add_template_global(seconds_needed, "seconds_needed")
    app.add_template_global(back_to_this_page, "back_to_this_page")
    app.add_template_filter(local_date, "localdate")
    app.add_template_filter(format_number, "number")  # 10 000 / 10,000: as the reader's language writes it
    app.add_template_global(cached_fragment, "cached_fragment")
    app.add_template_global(menu_entry_here, "menu_entry_here")
    app.extensions["portal.fragments"] = {}

    # The same for every page of this app: globals (which macros imported without the page's context see too).
    settings = app.extensions[current.SETTINGS]
    app.jinja_env.globals.update(environment=settings.environment, settings=settings)
