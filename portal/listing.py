"""The flow list's state in the query string, and the safe way from one page to the next.

The service's paging is only partly specified, so the portal trusts none of it blindly: it
follows a continuation the service names, falls back to DESIGN's cursors, offers Next when it
cannot know better, and stops with a notice rather than loop when the service ignores the
position it was given.
"""

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import parse_qsl, urlencode

from flask import url_for
from flask_babel import gettext as _
from flask_babel import ngettext

from .flowapi import FLOW_ID, FlowPage
from .flowapi.records import as_written, read_flag, sent_unread
from .flowlinks import from_url_form, url_form
from .i18n import grouped, request_words
from .presentation import quoted

PAGE_SIZES = (10, 25, 50, 100)
DEFAULT_LIMIT = 10
_SEEN = re.compile(r"[0-9a-f]{16}")
_PARAMETER = re.compile(r"[A-Za-z_][A-Za-z0-9_.\[\]-]{0,40}")
MAX_POSITION_VALUE, MAX_POSITION_PARAMS = 2048, 4  # continuation tokens of 1-2 kB are common
MAX_PAGE_ADDRESS = 3800  # gunicorn reads request lines of up to 4094 bytes (gunicorn.conf.py), "GET " and all
RESERVED = ("limit", "archived")


@dataclass(frozen=True)
class ListQuery:
    """Everything that says which page of which list: limit, tab, and where in the list."""

    limit: int = DEFAULT_LIMIT
    archived: bool = False
    after: str | None = None  # DESIGN's cursors: the page after / before this flow id
    before: str | None = None
    at: tuple[tuple[str, str], ...] = ()  # a position the service named itself (its next link's parameters)
    seen: str | None = None  # fingerprint of the first row of the page we came from, to notice a loop

    @property
    def positioned(self) -> bool:
        return bool(self.after or self.before or self.at)

    def url(self, **changes) -> str:
        values = {"limit": self.limit, "archived": self.archived, "after": None, "before": None, "at": ()} | changes
        args: dict[str, Any] = {
            "limit": values["limit"] if values["limit"] != DEFAULT_LIMIT else None,
            "archived": "true" if values["archived"] else None,
            "after": _cursor_in_url(values["after"]),
            "before": _cursor_in_url(values["before"]),
            "at": urlencode([(key, url_form(value)) for key, value in values["at"]]) or None,
            "seen": values.get("seen"),
        }
        return url_for("flows.index", **{key: value for key, value in args.items() if value})


def parse_list_query(args) -> tuple[ListQuery, list[str]]:
    """The query, with every unusable parameter dropped and a message saying so."""
    problems = []
    limit = args.get("limit", str(DEFAULT_LIMIT))
    if limit not in {str(size) for size in PAGE_SIZES}:
        sizes = ", ".join(map(str, PAGE_SIZES))
        problems.append(_("Page size must be one of %(sizes)s; showing 10.", sizes=sizes))
        limit = str(DEFAULT_LIMIT)
    archived = args.get("archived", "false").lower()
    if archived not in ("true", "false"):
        problems.append(_("The archived filter is true or false; showing current flows."))
        archived = "false"
    after, before = _cursor_from_url(args.get("after")), _cursor_from_url(args.get("before"))
    at = _position(args.get("at"))
    cursors_ok = all(cursor is None or FLOW_ID.fullmatch(cursor) for cursor in (after, before))
    if not cursors_ok or at is None or len([given for given in (after, before, at) if given]) > 1:
        problems.append(_("That page position is not valid; showing the first page."))
        after = before = None
        at = ()
    # The first page instead of the one asked for is no page repeated by the service: then nothing was seen.
    seen = args.get("seen") if _SEEN.fullmatch(args.get("seen", "")) and not problems else None
    return ListQuery(int(limit), archived == "true", after, before, at, seen), problems


def _cursor_in_url(flow_id: str | None) -> str | None:
    return url_form(flow_id) if flow_id else None


def _cursor_from_url(text: str | None) -> str | None:
    """A cursor's flow id; a sealed one this portal did not make reads as "" (not valid: the first page)."""
    return (from_url_form(text) or "") if text else None


def _position(raw: str | None) -> tuple[tuple[str, str], ...] | None:
    """The `at` parameter as pairs; None when it is malformed."""
    if not raw:
        return ()
    # A value that reads as a national id (a service paging by flow ids) is sealed as flow ids are; a value that
    # only looks sealed is the service's own.
    pairs = [(key, from_url_form(value) or value) for key, value in parse_qsl(raw, keep_blank_values=True)]
    usable = all(
        _PARAMETER.fullmatch(key) and key not in RESERVED and len(value) <= MAX_POSITION_VALUE and value.isprintable()
        for key, value in pairs
    )
    return tuple(pairs) if pairs and usable and len(pairs) <= MAX_POSITION_PARAMS else None


def fingerprint(page: FlowPage) -> str | None:
    """A short hash of the page's first row; None when rows carry nothing to tell them apart."""
    if not page.items or not page.items[0].raw:
        return None
    first = json.dumps(page.items[0].raw, sort_keys=True, default=str)
    return hashlib.sha256(first.encode("utf-8", "replace")).hexdigest()[:16]


@dataclass
class Navigation:
    """Where the page's Previous, Next and Newest links go, and what the person must be told."""

    previous_url: str | None = None
    next_url: str | None = None
    newest_url: str | None = None
    notices: list[str] = field(default_factory=list)


def navigate(query: ListQuery, page: FlowPage) -> Navigation:
    """The links around `page`, never one that would show the same page again."""
    nav = Navigation(notices=_content_notices(query, page))
    if repeats_previous_page(query.after, query.seen, page):
        nav.notices.append(
            _(
                "The Flow Service sent the previous page again instead of the next one: it ignores the page "
                "position the portal gave it. No further pages can be shown; go back to the newest flows."
            )
        )
        nav.newest_url = query.url()
        return nav
    nav.next_url = _next_url(query, page, nav.notices)
    if query.at:
        nav.newest_url = query.url()
    elif query.before and query.before in {item.id for item in page.items}:
        # Asked for the flows before X, it sent X among them: it ignores the position, and a Previous link from
        # here would lead to this same page for ever.
        nav.notices.append(
            _(
                "The Flow Service ignores the position to go back from, so this may not be the page before the one "
                "you were on; go back to the newest flows or on with Next."
            )
        )
        nav.newest_url = query.url()
    elif query.after or (query.before and page.has_more is not False):
        nav.previous_url = query.url(before=page.first_id or query.after)
    return nav


def past_the_cursor(after: str | None, page: FlowPage) -> tuple[FlowPage, int]:
    """`page` without the flows up to and including `after` when the service sent them again at its start (reading
    the cursor as "from" instead of "after"), and how many it left out; whole when nothing new comes after them
    (the previous page again: `repeats_previous_page`)."""
    ids = [item.id for item in page.items]
    if not after or after not in ids or ids[-1] == after:
        return page, 0
    cut = ids.index(after) + 1
    return replace(page, items=page.items[cut:], left_out=page.left_out + cut), cut


def within_the_page_size(page: FlowPage, limit: int, before: bool = False) -> tuple[FlowPage, int]:
    """`page` cut to the `limit` flows asked for when the service sent more (a page of 20,000 made a page of 29 MB),
    and how many were sent (0: as many as asked). Next (or Previous, going `before` a flow: the flows nearest it are
    kept) goes on from the flows shown. When the service names its own next position the flows sent are all shown
    (cut, the rest could not be asked for), up to `MOST_ROWS`: the page says so (`flows._more_than_asked`)."""
    sent = len(page.items)
    if sent <= limit:
        return page, 0
    if page.next_position is not None:
        return replace(page, items=page.items[:MOST_ROWS]), sent
    kept = page.items[-limit:] if before else page.items[:limit]
    return replace(page, items=kept, has_more=True), sent


MOST_ROWS = 500  # a page of 500 rows is about 700 kB of HTML


def repeats_previous_page(after: str | None, previous: str | None, page: FlowPage) -> bool:
    """Whether `page` is the page asked from again: it ends with the `after` cursor (nothing new after it), or has
    the previous page's fingerprint."""
    ids = [item.id for item in page.items if item.id]
    return bool(after and ids and ids[-1] == after) or bool(previous and previous == fingerprint(page))


# Why a walk cannot go on although the service says more flows follow.
SAME_POSITION, NO_WAY_ON = "same_position", "no_way_on"


@dataclass(frozen=True)
class NextStep:
    """Where the page after a page is (`at`, else `after`), nowhere (the last page), or why it cannot be asked for."""

    at: tuple[tuple[str, str], ...] = ()  # a position the service named itself
    after: str | None = None  # else DESIGN's cursor: the last flow id
    problem: str | None = None  # SAME_POSITION or NO_WAY_ON
    guessed: bool = False  # the service did not say whether more follow; the page is full, so more may
    contradicted: bool = False  # it said no more follow, yet named a next position of its own


def next_step(page: FlowPage, limit: int, at: tuple[tuple[str, str], ...] = ()) -> NextStep:
    """The way from `page` (asked for at position `at`, `limit` per page) to the next one, never the same one."""
    guessed = page.has_more is None and bool(page.next_position or len(page.items) + page.left_out >= limit)
    # `has_more: false` beside a next link or cursor: the position is the service's word too, and the only one that
    # can show more (a stand-in's list stopped at its first page, without a word, 13 flows out of reach).
    contradicted = page.has_more is False and page.next_position is not None and page.names_a_next_page
    if not (page.has_more or guessed or contradicted):
        return NextStep()
    if page.next_position:
        position = tuple(page.next_position.items())
        if position == at:
            return NextStep(problem=SAME_POSITION, guessed=guessed)
        return NextStep(at=position, guessed=guessed, contradicted=contradicted)
    if page.last_id:
        return NextStep(after=page.last_id, guessed=guessed)
    return NextStep(problem=NO_WAY_ON, guessed=guessed)


def _next_url(query: ListQuery, page: FlowPage, notices: list[str]) -> str | None:
    seen = fingerprint(page)
    if query.before and page.last_id:
        return query.url(after=page.last_id, seen=seen)  # moving back: the later pages are known to exist
    step = next_step(page, query.limit, query.at)
    if step.contradicted:
        notices.append(_("The Flow Service says no more flows follow, yet names a next page: Next asks for it."))
    elif step.guessed and page.has_more_unread:
        notices.append(
            _(
                "The Flow Service sent %(value)s where it says whether more flows follow, which is neither yes nor "
                "no; Next is offered because this page is full.",
                value=quoted(page.has_more_unread),
            )
        )
    elif step.guessed:
        notices.append(
            _("The Flow Service did not say whether more flows follow; Next is offered because this page is full.")
        )
    elif page.has_more is None and page.has_more_unread and page.items and not page.next_position:
        # (None still: a page cut to the size asked for goes on, `within_the_page_size`, whatever was sent)
        notices.append(
            _(
                "The Flow Service sent %(value)s where it says whether more flows follow, which is neither yes nor "
                "no, and fewer flows than asked for: most likely this is the last page.",
                value=quoted(page.has_more_unread),
            )
        )
    elif page.has_more is None and page.items and not page.next_position:
        # The end of the list, or a page cut to a size the service caps (no way to tell): not said, it hid flows.
        notices.append(
            _(
                "The Flow Service did not say whether more flows follow, and sent fewer than asked for: most likely "
                "this is the last page. If the service keeps its pages smaller, the portal's index has the older "
                "flows it has seen."
            )
        )
    if not page.items and (step.at or step.after):
        notices.append(_("The Flow Service sent no flows on this page, yet says more follow: Next asks for them."))
    if step.problem == SAME_POSITION:
        notices.append(_("The Flow Service named this same page as the next one; no further pages can be shown."))
    elif step.problem == NO_WAY_ON:
        notices.append(
            _("The Flow Service says more flows exist but gives no way to ask for them (no ids and no next link).")
        )
    elif step.at:
        address = query.url(at=step.at, seen=seen)
        if len(address) <= MAX_PAGE_ADDRESS and _position(urlencode(step.at)) == step.at:
            return address
        notices.append(
            _(
                "The Flow Service's position for the next page is too long to go into an address (%(length)s "
                "characters), so no further pages can be shown here; search the portal's index for older flows.",
                length=grouped(len(urlencode(step.at)), request_words().language),
            )
        )
    elif step.after:
        return query.url(after=step.after, seen=seen)
    return None


def _content_notices(query: ListQuery, page: FlowPage) -> list[str]:
    notices = []
    odd = sum(1 for item in page.items if item.not_an_object)
    blank = sum(1 for item in page.items if not item.has_details) - odd
    without_id = page.items_without_id - blank - odd
    if odd:  # "without any details (as its specification shows)" described {} items, not these (a stand-in)
        notices.append(
            ngettext(
                "The Flow Service sent %(num)s entry that is not a flow (no JSON object) in the list; it is not shown.",
                "The Flow Service sent %(num)s entries that are not flows (no JSON objects) in the list; they are not "
                "shown.",
                odd,
            )
        )
    if blank:
        notices.append(
            ngettext(
                "The Flow Service lists %(num)s flow without any details (as its specification shows), "
                "so it cannot be shown or opened here.",
                "The Flow Service lists %(num)s flows without any details (as its specification shows), "
                "so they cannot be shown or opened here.",
                blank,
            )
        )
    if without_id:
        notices.append(
            ngettext(
                "The Flow Service sent %(num)s flow without an id, so it cannot be opened from here.",
                "The Flow Service sent %(num)s flows without an id, so they cannot be opened from here.",
                without_id,
            )
        )
    unread = [
        item.raw["status"] for item in page.items if item.status is None and sent_unread(item.raw, "status", None)
    ]
    if unread:  # shown as unknown, it said nothing of what was sent (a stand-in: 3, ["Opened"])
        notices.append(
            ngettext(
                "The Flow Service sent %(num)s flow's status in a form the portal cannot read (%(value)s); its row "
                "shows the status the portal last heard, if any.",
                "The Flow Service sent %(num)s flows' statuses in a form the portal cannot read (%(value)s and "
                "others); their rows show the status the portal last heard, if any.",
                len(unread),
                value=quoted(as_written(unread[0])),
            )
        )
    unread_names = sum(
        1
        for item in page.items
        if (item.reference_id is None and sent_unread(item.raw, "referenceId", None))
        or (item.national_id is None and sent_unread(item.raw, "nationalId", None))
    )
    if unread_names:  # "—", as if the service had sent none (a stand-in: a reference of 10040.5, an id of {})
        notices.append(
            ngettext(
                "The Flow Service sent %(num)s flow's reference or national id in a form the portal cannot read; it "
                "shows as “—”.",
                "The Flow Service sent %(num)s flows' references or national ids in a form the portal cannot read; "
                "they show as “—”.",
                unread_names,
            )
        )
    ids = [item.id for item in page.items if item.id]
    # Shown as sent, each time (one row left out would hide what the service said), and said: a stand-in's page.
    if len(set(ids)) < len(ids):  # counted only then: every list page comes here
        repeated = sum(1 for times in Counter(ids).values() if times > 1)
        notices.append(
            ngettext(
                "The Flow Service listed %(num)s flow more than once on this page; it is shown each time.",
                "The Flow Service listed %(num)s flows more than once on this page; each is shown each time.",
                repeated,
            )
        )
    # Read as the rows read it: "1 archived" beside three rows marked so (1, "true") was a stand-in's find.
    archived = sum(1 for item in page.items if read_flag(item.raw.get("archived")) is True)
    if archived and not query.archived:
        notices.append(
            ngettext(
                "The Flow Service included %(num)s archived flow in the current list.",
                "The Flow Service included %(num)s archived flows in the current list.",
                archived,
            )
        )
    return notices
