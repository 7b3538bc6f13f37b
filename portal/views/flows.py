"""Flows: the list (live, or searched in the index, and its CSV export), the detail page, creating a flow."""

import logging
import math
import secrets
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from babel.lists import format_list
from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_babel import ngettext
from flask_login import current_user
from flask_wtf.csrf import CSRFError

from .. import current, news, requestid
from ..access_log import EXPORT_ROW, FLOW_DETAIL, REVEAL, SEARCH, record_access, recorded_while_read, subject_key_of
from ..audit import record_audit
from ..csvexport import csv_response
from ..errors import (
    csrf_error_page,
    log_upstream_error,
    render_error,
    service_away,
    upstream_explained,
    upstream_status,
    upstream_title,
)
from ..flowapi import (
    FLOW_ID,
    Conflict,
    EndpointNotFound,
    FlowApiError,
    FlowClient,
    FlowDetail,
    FlowPage,
    FlowSummary,
    InsufficientScope,
    NotFound,
    RateLimited,
    Unauthorized,
    ValidationFailed,
)
from ..flowindex.feed import saw_created, saw_detail, saw_page
from ..flowindex.gapcheck import flag_gap, mark_unknown, portal_now, reconcile
from ..flowindex.keys import name_key, read_national_id
from ..flowindex.observations import from_summary, lifecycle_told
from ..flowindex.search import (
    COUNT_CAP,
    ResultPage,
    count_without_a_name,
    export_rows,
    flow_named,
    index_knows_reference,
    indexed_mask,
    last_listed,
    looks_like_a_reference,
    person_searched,
    references_ending_in,
    search_page,
    status_counts,
)
from ..flowindex.status import (
    FlowStatus,
    archived_list_in_doubt,
    consent_since,
    current_listed_since,
    mostly_current,
    status_of_detail,
    status_of_record,
    statuses_of_page,
)
from ..flowindex.store import apply_observations, index_record
from ..flowlinks import SEALED, hidden_in_urls, left_untidy, sealed_address, sealed_anew, url_form
from ..flowsearch import (
    DEFAULTS,
    Problem,
    SearchQuery,
    read_search,
    search_box_fields,
    tie_left_out,
    typed_whole,
    wants_index,
)
from ..forms import ConfirmForm, CreateFlowForm, FlowSearchForm, KeptCreateInput, LoginForm, RevealForm
from ..i18n import as_sentence, grouped, request_words
from ..listing import DEFAULT_LIMIT, ListQuery, navigate, parse_list_query, past_the_cursor, within_the_page_size
from ..masking import mask_flow_id, mask_national_id, mask_text
from ..models import FlowRecord, utc_now
from ..nationalid import why_not_an_id
from ..presentation import quoted, shown
from ..reveals import grant_reveal, purpose_to_log, reveal_is_fresh
from ..roles import role_required
from ..security import asked_here, asking_to_continue, followed_from_another_site
from ..staff_sessions import SEARCHED_PERSON, keep_input_when_signed_out, typed_by, typist_mark
from ..submissions import (
    SubmissionInProgress,
    SubmissionUnconfirmed,
    claim_submission,
    created_or_creating,
    forget_submission,
    mark_unconfirmed,
    settle_submission,
)
from ..throttle import NATIONAL_ID_SEARCHES_PER_USER, PERSON_SEARCHED_LATELY, ThrottleUnavailable, throttle
from ..webhooks.store import (
    event_document,
    events_for_flow,
    flow_events_after,
    last_event_row,
    left_out_by_reference,
    without_repeats,
)
from ..worklists import open_flows_of
from .sign_in import safe_next

bp = Blueprint("flows", __name__, url_prefix="/flows")
log = logging.getLogger(__name__)


def flow_client() -> FlowClient:
    return current.flow_client()


def settings():
    return current.settings()


@bp.get("")
def index():
    """The flow list, newest first, paged the way the service allows, never in a loop; or a search of the index."""
    if wants_index(request.args):
        return _search()
    query, problems = parse_list_query(request.args)
    for problem in problems:
        flash(problem, "warning")
    if problems or left_untidy(request.args, DEFAULTS):  # the search box's empty fields, for one
        return redirect(query.url(after=query.after, before=query.before, at=query.at, seen=query.seen))
    # Taken before the list is read: an event that comes meanwhile is news to the page, not lost to it.
    shown_up_to = None if query.positioned else last_event_row()
    try:
        query, page, notices = _fetch_page(query)
    except ValidationFailed:
        if not query.positioned:
            raise  # the first page itself was refused: say so, never redirect to it again
        flash(_("That page position no longer exists; showing the first page."), "warning")
        return redirect(query.url())
    except FlowApiError as error:
        if not service_away(error):
            raise
        return _index_instead(error, query)
    if query.before and page.has_more is False:
        # Back at the newest flows: show the first page whole, not the short remainder.
        return redirect(query.url())
    page = _as_asked(query, page, notices)
    tab_says_archived = _what_the_tab_says(query, page, notices)
    saw_page(page, tab_says_archived)
    nav = navigate(query, page)
    return render_template(
        "flows/index.html",
        page=page,
        query=query,
        nav=nav,
        notices=notices + nav.notices,
        row_statuses=statuses_of_page(page, tab_says_archived),
        empty_search_form=FlowSearchForm,  # built only when the page's cached search box is not there yet
        # the first page, left open, hears of webhook events (statuses changing); a later page is history
        watch_url=None if shown_up_to is None else news.flow_list_heard_url(shown_up_to),
    )


def _as_asked(query: ListQuery, page: FlowPage, notices: list[str]) -> FlowPage:
    """The page the service sent, as it was asked for: without the flows it sent again from the previous page, and
    no longer than the page size; each said in `notices`."""
    page, resent = past_the_cursor(query.after, page)
    if resent:
        notices.append(
            ngettext(
                "The Flow Service sent the last flow of the previous page again at the start of this one; it is "
                "shown there only.",
                "The Flow Service sent the last %(num)s flows of the previous page again at the start of this one; "
                "they are shown there only.",
                resent,
            )
        )
    page, sent = within_the_page_size(page, query.limit, before=bool(query.before))
    if sent:
        notices.append(_more_than_asked(sent, len(page.items), query.limit, page.next_position is not None))
    return page


def _more_than_asked(sent: int, shown: int, asked: int, its_own_next: bool) -> str:
    """What a page that came with more flows than asked for shows of them (a stand-in: 5,000 rows for 10, unsaid)."""
    words = request_words().language
    numbers = {name: grouped(number, words) for name, number in (("sent", sent), ("asked", asked), ("shown", shown))}
    numbers["left"] = grouped(sent - shown, words)
    if not its_own_next:
        return _(
            "The Flow Service sent %(sent)s flows where %(asked)s were asked for: the first %(asked)s are shown, "
            "and Next goes on from there.",
            **numbers,
        )
    if shown == sent:
        return _(
            "The Flow Service sent %(sent)s flows where %(asked)s were asked for: all are shown, as its next page "
            "goes on after the last of them.",
            **numbers,
        )
    return _(
        "The Flow Service sent %(sent)s flows where %(asked)s were asked for: the first %(shown)s are shown, and "
        "the other %(left)s cannot be, as its next page goes on after the last flow it sent.",
        **numbers,
    )


# The archived tab holding at least 3 flows the current list showed within the hour, half its page or more, is a
# service that ignores the archived filter: its rows are not taken for archived because of the tab.
CURRENT_LATELY = timedelta(hours=1)
ARCHIVED_DOUBT_LEAST = 3


def _what_the_tab_says(query: ListQuery, page: FlowPage, notices: list[str]) -> bool | None:
    """Whether the page's flows are archived by the tab they were asked for; None when the service's archived list
    is in doubt (then each item's own `archived`, if it says, decides)."""
    if not query.archived:
        return False
    lately = utc_now() - CURRENT_LATELY
    if not (archived_list_in_doubt(page, lately, least=ARCHIVED_DOUBT_LEAST) or _current_list_shares(page, lately)):
        return True
    notices.append(
        _(
            "The Flow Service's archived list holds flows its current list showed within the hour: it may not "
            "filter by archived. They are not marked archived here unless they say so themselves."
        )
    )
    return None


def _current_list_shares(page: FlowPage, lately: datetime) -> bool:
    """Without a current list in the index lately (the first look after start, or after an hour), the archived tab
    could not be judged, and a service that reads `archived=true` as "archived too" had its current flows shown
    archived (found by a stand-in): its current list's first page is asked for once, indexed, and compared."""
    if current_listed_since(lately) or len(page.items) < ARCHIVED_DOUBT_LEAST:
        return False
    try:
        current_page = flow_client().list_flows(max(len(page.items), DEFAULT_LIMIT), archived=False)
    except FlowApiError:
        return False  # the tab's word stands, as it did
    saw_page(current_page, False)
    shared = {item.id for item in current_page.items if item.id} & {item.id for item in page.items if item.id}
    return mostly_current(len(shared), len(page.items), ARCHIVED_DOUBT_LEAST)


def _index_instead(error: FlowApiError, query: ListQuery):
    """The live list failed: the portal's own index instead, current and archived flows together (an index list of
    one tab would have the live list's address, which asks the service again), at the page size asked for; the
    notice says why. It cannot loop: no call there."""
    log_upstream_error(error)  # a list of the wrong shape left no trace but the page (a stand-in)
    support = _(" (for support: %(code)s)", code=error.support_code) if error.support_code else ""
    flash(
        _(
            "%(problem)s, so these flows come from the portal's index, current and archived together, with each "
            "status as the portal last heard it; the live list comes back when the service answers.%(support)s",
            problem=upstream_title(error),
            support=support,
        ),
        "warning",
    )
    limit = query.limit if query.limit != DEFAULT_LIMIT else None
    return redirect(url_for("flows.index", archived="all", limit=limit))


@bp.post("/search")
def search_sent():
    """The search box, sent: on to the search's own address, a national id in it (or what has the shape of one)
    sealed, so that no address holds it, not even the first (a new user's walk: the GET form put it in the address
    a proxy's log keeps before the list took it out). Empty fields and defaults are left out, as the list would,
    and what the box does not hold (an attack: 5,000 characters typed made an address gunicorn refused with its own
    bare 414 page)."""
    kept = search_box_fields(request.form.items(multi=True))
    if any(name == "q" for name, _value in kept):  # typed on a person's results: a new search (its address, too)
        kept = [(name, value) for name, value in kept if name != "person"]
    return redirect(sealed_address(f"{url_for('flows.index')}?{urlencode(kept)}", shapes=True))


@bp.get("/search")
def search_address_read():
    """The search box's own address read as a page: the flow list. Where a search sent as the session ended leads
    back after sign-in, and Enter in the address bar of its expired-form page: read as the flow "search", it was
    asked of the service and answered "Flow not found"."""
    return redirect(url_for("flows.index"))


def _search():
    """Flows found in the index: straight to a flow named exactly, else a filtered, counted keyset page."""
    query, problems = read_search(request.args)
    if query.national_id:  # an address never keeps a national id: search by its keyed hash instead
        return _by_national_id(query, problems)
    if problems:
        return _without_unusable_values(query, problems)
    if query.text and not query.positioned and query.named_flow:
        return redirect(url_for("flows.detail", flow_id=query.named_flow))  # its address holds nothing typed
    # Nor text that holds one; and the search box's empty fields are left out of the address.
    if typed_whole(query, request.args.get("q", "")) or left_untidy(request.args, DEFAULTS):
        return redirect(query.url(**{name: query.args[name] for name in ("after", "before") if name in query.args}))
    if query.search.person and followed_from_another_site():  # recorded under this person: asked first
        return asking_to_continue()
    if query.search.person and (refused := _refused_person_search(query.search.person)):
        return refused  # each person searched counts, however the search was reached
    # A mistyped id is kept in the box for its digits to be checked, and finds nothing (a walk: it listed every flow).
    nothing = query.nothing_searched
    page = ResultPage([], None, None) if nothing else search_page(query.search, query.limit, query.after, query.before)
    if query.before and page.previous_before is None:
        return redirect(query.url())  # back at the start: the first page, whole
    if query.mistyped_id:
        Problem(why_not_an_id(query.args.get("q", "")), "q").flash()  # said under the box (`tie_left_out`)
    elif query.unread_id:
        flash(
            _(
                "The search held a national id that search cannot read, so it was left out of the box: search one id "
                "at a time, its digits with at most a space or a hyphen between them."
            ),
            "warning",
        )
    person = _audit_person_search(query, page.rows)
    counts = {} if nothing else status_counts(query.search)
    return render_template(
        "flows/search.html",
        query=query,
        tied_fields=tie_left_out(query.form),
        page=page,
        row_statuses={row.flow_id: status_of_record(row) for row in page.rows},
        counts=counts,
        count_cap=COUNT_CAP,
        person=person,
        meant=references_ending_in(query.text) if query.text and not page.rows and not query.positioned else [],
        part_of_an_id=not page.rows and _part_of_an_id(query.text),
        unnamed=count_without_a_name(query.search) if query.text and name_key(query.text) else 0,
        synced=last_listed(),
        now=utc_now(),
    )


def _part_of_an_id(text: str | None) -> bool:
    """Six to ten digits, alone: the birth date of a national id (or more of it), which search does not take apart
    (a new user's walk: 19121212 found nothing, and nothing said why)."""
    return bool(text and text.isascii() and text.isdigit() and 6 <= len(text) <= 10)


def _person_looked_up(person: str):
    """Count a look-up of a person by national id against this staff member's limit (a person once an hour);
    None when already counted within the hour, else the limit's verdict. ThrottleUnavailable when it cannot tell."""
    searched = f"{current_user.id}:{person}"
    if throttle().used_up("national-id-searched", PERSON_SEARCHED_LATELY, searched):
        return None
    verdict = throttle().attempt("national-id-search", NATIONAL_ID_SEARCHES_PER_USER, str(current_user.id))
    if verdict.allowed:
        throttle().attempt("national-id-searched", PERSON_SEARCHED_LATELY, searched)
    return verdict


def _refused_person_search(person: str):
    """The search page without the search, saying why, once this staff member has searched by too many national ids
    lately. Each person counts once an hour (`person`: the id's keyed hash), however often their results are read:
    pages, filters, Back, a reload; a guess is a new person every time. Counted from the id typed on, before the
    redirect to the hash's address: that address is the same for the same id, so it would answer a guess too."""
    try:
        verdict = _person_looked_up(person)
    except ThrottleUnavailable:
        flash(_("A search by national id cannot be made just now: try again in a minute."), "danger")
        return redirect(url_for("flows.index", archived="all"))
    if verdict is None or verdict.allowed:
        return None
    log.warning("national-id searches refused for user %s: over the limit", current_user.id)
    minutes = math.ceil(verdict.retry_after / 60)
    flash(
        ngettext(
            "You have searched by national id many times in a short while. You can search by one again in "
            "%(num)s minute; names and references can be searched meanwhile.",
            "You have searched by national id many times in a short while. You can search by one again in "
            "%(num)s minutes; names and references can be searched meanwhile.",
            minutes,
        ),
        "warning",
    )
    return redirect(url_for("flows.index", archived="all"))


def _by_national_id(query: SearchQuery, problems: list[Problem], export: bool = False):
    """A search by a national id typed into the address: counted, then on to the id's keyed hash (the same for the
    same id, so it is itself an answer to a guess). From another site, neither counted nor answered: first out of
    the address, sealed with a random nonce (no seal to match a guess against), then "Continue?" there."""
    national_id = query.national_id
    assert national_id is not None  # the callers' test
    if followed_from_another_site():
        if not request.args.get("q", "").startswith(SEALED):
            sealed: dict[str, Any] = request.args.to_dict() | {"q": sealed_anew(query.args["q"])}
            return redirect(url_for(request.endpoint or "flows.index", **sealed))
        return asking_to_continue()
    for problem in problems:
        problem.flash()
    key = national_id.keyed_hash(settings().index_key)
    born = query.search.born
    if born and national_id.birth_date and born != national_id.birth_date:  # it would find nothing, unsaid (a walk)
        query = replace(query, args=query.args | {"born": ""}, search=replace(query.search, born=None))
        Problem(_("Born was left out: it is not the birth date in the national id searched for.")).flash()
    searched = query.with_person(key).export_url() if export else query.url(q=None, person=key)
    session[SEARCHED_PERSON] = [key, national_id.masked]  # masked, as pages show it: for a person of no flow
    return _refused_person_search(key) or redirect(searched)


def _searched_mask(person: str) -> str | None:
    """The masked id of the person last searched by national id in this session, if `person` is theirs: a person
    the index knows no flow of is named by it on the results and in the audit log (a walk: "the person whose id was
    searched for" did not say which)."""
    searched = session.get(SEARCHED_PERSON)
    if isinstance(searched, list) and len(searched) == 2 and searched[0] == person:
        return str(searched[1])
    return None


def _without_unusable_values(query: SearchQuery, problems: list[Problem]):
    """Say which values could not be used, and show the search without them."""
    for problem in problems:
        problem.flash()
    return redirect(query.url())


def _audit_person_search(query: SearchQuery, rows) -> str | None:
    """Write a search by national id to the audit log (its masked form and hash, never the id); the mask."""
    if not query.search.person:
        return None
    masked = next((row.national_id_masked for row in rows if row.national_id_masked), None)
    # A filter may leave none of the person's flows here; the index may hold none of them.
    masked = masked or indexed_mask(query.search.person) or _searched_mask(query.search.person)
    target = (
        f"national id {mask_national_id(masked) if masked else '(no flow indexed)'} hash:{query.search.person[:12]}"
    )
    record_audit(current_user.username, "search_national_id", target)
    record_access(query.search.person, SEARCH, "flow search")
    return masked


EXPORT_COLUMNS = (
    "reference_id",
    "flow_id",
    "last_name",
    "national_id_masked",
    "country",
    "consent_status",
    "lifecycle",
    "archived",
    "has_incidents",
    "created_at",
    "last_change_at",  # the flow's last change as the pages and the stuck list give it (not the index row's)
    "seen_at",
)


@bp.get("/export.csv")
@asked_here
def export():
    """The searched and filtered flows as CSV, every page of them, streamed; each export is audited."""
    query, problems = read_search(request.args)
    if query.national_id:  # typed into the address: out of it, as the list does
        return _by_national_id(query, problems, export=True)
    if problems:
        return _without_unusable_values(query, problems)
    if typed_whole(query, request.args.get("q", "")):
        return redirect(query.export_url())
    if query.nothing_searched:  # searched without it, the export held every flow: back to the list, which says why
        return redirect(query.url())
    if query.search.person and (refused := _refused_person_search(query.search.person)):  # as a search does
        return refused
    record_audit(current_user.username, "export_flows", query.describe())
    people = recorded_while_read(
        export_rows(query.search), EXPORT_ROW, lambda row: (row.national_id_hash, "flows export")
    )
    rows = ([getattr(row, column) for column in EXPORT_COLUMNS] for row in people)
    return csv_response(f"flows-{utc_now():%Y%m%d-%H%M%S}.csv", list(EXPORT_COLUMNS), rows)


def _fetch_page(query: ListQuery) -> tuple[ListQuery, FlowPage, list[str]]:
    """The page asked for; if the service refuses the page size, the default size once, said plainly."""
    try:
        return query, _list_page(query), []
    except ValidationFailed as error:
        if query.positioned or query.limit == DEFAULT_LIMIT:
            raise
        refused = _("The Flow Service refused %(limit)d flows per page, so 10 are shown.", limit=query.limit)
        reason = _(" It said: %(reason)s", reason=error.reason) if error.reason else ""
        fallback = replace(query, limit=DEFAULT_LIMIT)
        return fallback, _list_page(fallback), [refused + reason]


def _list_page(query: ListQuery) -> FlowPage:
    return flow_client().list_flows(
        query.limit, query.archived, query.after, query.before, position=dict(query.at) or None
    )


def _valid_flow_id(flow_id: str) -> str:
    if not FLOW_ID.fullmatch(flow_id):
        abort(404)
    return flow_id


def _sandbox_consent_url(flow) -> str | None:
    """Where a person plays the individual, for a flow of the sandbox (not a real service's)."""
    path = flow.sandbox_config.get("consentUrl")
    if flow.sandbox and isinstance(path, str) and path.startswith("/consent/"):
        return settings().api_url + path
    return None


def _retrieve(flow_id: str):
    """The retrieve response; a 404 for a flow id webhook events named marks it unknown to the service."""
    try:
        return flow_client().get_flow(flow_id)
    except NotFound:
        mark_unknown(flow_id, portal_now())
        raise


def _render_detail(flow_id: str, revealed: bool = False, reveal_form: RevealForm | None = None):
    flow = _retrieve(_valid_flow_id(flow_id))
    saw_detail(flow)
    record = index_record(flow.flow_id)
    person = _person_of(flow, record)
    if not revealed:
        record_access(person, FLOW_DETAIL, flow.flow_id)
    elif purpose := purpose_to_log(flow.flow_id):  # a reveal once, not at each reload of it
        record_access(person, REVEAL, flow.flow_id, purpose=purpose)
    timeline, shown_up_to = events_for_flow(flow.flow_id, flow.reference_id)
    events, received = without_repeats(timeline)
    status = status_of_detail(flow, record, events)
    if (status.answered_but_not_seen or _changed_since_listed(flow, status)) and _read_from_the_list(flow):
        record = index_record(flow.flow_id)
        status = status_of_detail(flow, record, events)
    return render_template(
        "flows/detail.html",
        flow=flow,
        status=status,
        disagreements=_disagreements(flow, record, person),
        unread_said=_fields_unread(flow),
        consent_since=consent_since(status, record, flow.created_at),
        compared=flag_gap(flow, record, events),
        erased_at=record.erased_at if record else None,
        refresh_form=ConfirmForm(formdata=None),
        revealed=revealed,
        consent_url=_sandbox_consent_url(flow) if status.awaiting_consent else None,
        events=events,
        received=received,
        shown_up_to=shown_up_to,
        lifecycles={event.id: lifecycle_told(event_document(event)) for event in events},
        left_out=left_out_by_reference(flow.flow_id, flow.reference_id),
        reveal_form=reveal_form or RevealForm(settings().reveal_purposes, formdata=None),
    )


def _person_of(flow: FlowDetail, record: FlowRecord | None) -> str | None:
    """The subject key of the flow's person: of the country the index has the flow under (created for, or read
    before), as a subject request finds them; a number may be valid in two (010111-9907, a Finn and a Swede)."""
    national_id = flow.data.national_id
    return (record and subject_key_of(national_id, record.country)) or subject_key_of(national_id)


def _changed_since_listed(flow: FlowDetail, status: FlowStatus) -> bool:
    """Whether the service changed a flow taken as current after its list last said so: archived meanwhile, which
    its answer here does not say (found by a new user: "Flow active", an archived flow's page, for good). Once a
    change (its `updatedAt`) was looked up, not again: a service whose clock runs ahead of the portal's would
    otherwise have every view read the list."""
    archived = status.archived
    if archived.value is True or not (flow.updated_at and archived.at and flow.updated_at > archived.at):
        return False
    looked_up = _process_memory("portal.changes_looked_up")  # flow id -> the updatedAt looked up
    if looked_up.get(flow.flow_id) == flow.updated_at:
        return False
    looked_up[flow.flow_id] = flow.updated_at
    return True


def _process_memory(name: str) -> dict:
    """A dictionary this process keeps across requests, emptied when full (a memory of what not to ask again)."""
    memory = current_app.extensions.setdefault(name, {})
    if len(memory) >= MOST_REMEMBERED:
        memory.clear()
    return memory


def _read_from_the_list(flow: FlowDetail) -> bool:
    """A flow whose answer the portal has not seen (completed), or changed since it was listed: its item in the
    service's list, which alone says the consent status and whether it is archived, written to the index as the
    list's word (not as heard: a change no event told of stays a gap). Whether the list showed it. A list that did
    not show it is not asked again for a while: each view of the page would otherwise cost its few list calls again
    (Refresh still asks)."""
    missed = _process_memory("portal.list_misses")  # flow id -> when the list did not show it
    now = current.clock()()
    if now - missed.get(flow.flow_id, -math.inf) < LIST_ASKED_AGAIN_AFTER:
        return False
    listed = _listed(flow)
    if listed is None:
        missed[flow.flow_id] = now
        return False
    observation = from_summary(*listed, portal_now())
    apply_observations([observation] if observation else [], settings().index_key)
    return True


LIST_ASKED_AGAIN_AFTER = 300  # seconds
# A flow's page asks the list for the flow's item (up to six calls) only for this long: past it, no next call
# (a slow list made the page wait 21 s, a stand-in). The status is then the index's, as when the list lacks it.
LIST_LOOKUP_SECONDS = 3
MOST_REMEMBERED = 1024


def _fields_unread(flow: FlowDetail) -> str | None:
    """The fields of the flow the service sent in a form the portal cannot read, said (the page shows them as "—")."""
    if not flow.unread:
        return None
    return ngettext(
        "The Flow Service sent the field %(names)s in a form the portal cannot read: it shows as “—” here, and as "
        "sent in the raw JSON below.",
        "The Flow Service sent the fields %(names)s in a form the portal cannot read: they show as “—” here, and as "
        "sent in the raw JSON below.",
        len(flow.unread),
        names=format_list([shown(name) for name in flow.unread], locale=request_words().language),
    )


def _disagreements(flow: FlowDetail, record: FlowRecord | None, person: str | None) -> list[str]:
    """Where the service contradicts itself about this flow: its answer names another flow id than the one asked
    for, or its list (as the index last heard it) names another person or reference. The page shows the answer
    for the flow asked for, and says so."""
    said: list[str] = []
    if flow.answered_as:
        said.append(
            _(
                "Asked for the flow %(asked)s, the Flow Service answered with a flow it calls %(answered)s.",
                asked=shown(flow.flow_id),
                answered=shown(flow.answered_as),
            )
        )
    if record is None or record.listed_at is None:
        return said
    if person and record.national_id_hash and record.national_id_hash != person:
        said.append(_("The Flow Service's list names another person for this flow than its answer here does."))
    if flow.reference_id and record.reference_id and record.reference_id != flow.reference_id:
        said.append(
            _(
                "The Flow Service's list gives this flow the reference %(listed)s; its answer here gives %(here)s.",
                listed=shown(record.reference_id),
                here=shown(flow.reference_id),
            )
        )
    return said


@bp.get("/<flow:flow_id>")
def detail(flow_id: str):
    """Everything the service knows about one flow, and the webhook events received for it."""
    typed = _valid_flow_id(flow_id.strip())  # a flow id or a reference: letters, digits, - and _
    if (named := flow_named(typed)) and named != flow_id:  # a reference (/flows/LA-10040): to its flow
        return redirect(url_for("flows.detail", flow_id=named))
    if not named and index_knows_reference(typed):  # a reference several flows share: let staff choose
        return redirect(url_for("flows.index", q=url_form(typed)))
    if not named and _a_person_of_the_index(typed):
        # A national id where a flow id goes (/flows/15108695088): the person's flows, as the search box finds them
        # (counted, audited), the service not asked for a flow by it (a walk: its access log then held the id).
        return redirect(url_for("flows.index", q=url_form(typed)))
    if hidden_in_urls(typed) and request.path.endswith(flow_id):  # asked for whole: leave it out of the address
        return redirect(url_for("flows.detail", flow_id=typed))
    try:
        return _render_detail(flow_id)
    except NotFound:
        if not looks_like_a_reference(typed) or index_record(typed) is not None:  # a flow id the index has heard of
            raise
        return _reference_not_indexed_yet(typed)


def _a_person_of_the_index(typed: str) -> bool:
    """Whether `typed` is no flow the index knows but the national id of a person it holds flows of. A service may
    name flows by national ids: an id the index knows neither way is asked for as a flow, as any other."""
    if index_record(typed) is not None or (person := person_searched(typed)) is None:
        return False
    return indexed_mask(person.keyed_hash(settings().index_key)) is not None


def _reference_not_indexed_yet(reference: str):
    """The service has no flow of this id, and the index knows no flow of this reference: not "the service has no
    such flow" (it may, made elsewhere since the portal last read its list; found by a new user)."""
    return render_error(
        404,
        _("No flow found by this reference yet"),
        _(
            "The Flow Service has no flow with the id %(reference)s, and the portal's index knows no flow with it as "
            "its reference. A flow made elsewhere since the portal last read the service's list is indexed once the "
            "list shows it: go to the flow list, then try again.",
            reference=mask_text(reference),
        ),
        retry=True,
    )


@bp.get("/<flow:flow_id>/heard")
def heard(flow_id: str):
    """What the flow's page, left open, asks in the background (portal/news.py): the flow's webhook events
    received after the row it showed up to. From the portal's own store: nothing from the service."""
    flow_id = _valid_flow_id(flow_id)
    row = news.row_asked()
    if row is None:
        return news.not_a_row()
    record = index_record(flow_id)
    arrived = flow_events_after(flow_id, record.reference_id if record else None, row, news.NAMED_TYPES)
    return news.answer(arrived, news.A_FLOW)


@bp.post("/<flow:flow_id>/refresh")
def refresh(flow_id: str):
    """Fetch the flow again and write it to the index as heard: a change no event told of is then known."""
    if not ConfirmForm().validate_on_submit():
        abort(400)
    flow = _retrieve(_valid_flow_id(flow_id))
    listed = _listed(flow)
    reconcile(flow, portal_now(), listed)
    flash(_("The flow was refreshed from the Flow Service; the portal's index now has what it says."), "success")
    if listed is None:
        flash(_("The Flow Service's list did not show this flow: its consent status is what the portal last knew."))
    back = request.form.get("next")  # the admin list of gaps goes back to itself
    return redirect(safe_next(back) if back else url_for("flows.detail", flow_id=flow.flow_id))


def _listed(flow: FlowDetail) -> tuple[FlowSummary, bool] | None:
    """The flow's item in the service's list (current flows, then archived ones; a cancelled flow the other way
    round), and whether it was the archived list; None when neither shows it or the list cannot be read."""
    record = index_record(flow.flow_id)
    archived_first = flow.status == "cancelled" or bool(record and record.archived)
    clock = current.clock()
    give_up_at = clock() + LIST_LOOKUP_SECONDS

    def in_time() -> bool:
        return clock() < give_up_at

    for archived in (archived_first, not archived_first):
        if not in_time():
            log.warning("flow refresh: the list answered too slowly to look in the other one")
            return None
        try:
            item = flow_client().listed_item(flow.flow_id, archived, in_time)
        except (NotFound, ValidationFailed):  # a service that takes no cursor outside its list
            continue
        except FlowApiError as error:
            log.warning("flow refresh: the list could not be read (%s)", type(error).__name__)
            return None
        if item is not None:
            return item, archived
    return None


@bp.route("/<flow:flow_id>/reveal", methods=["GET", "POST"])
@role_required("operator")
def reveal(flow_id: str):
    """Show the full national id for a stated purpose; who, when and why go to the audit log.

    The POST records the reveal and redirects here: within REVEAL_WINDOW the page can be reloaded
    without a second record (the browser keeps nothing: every page is `no-store`).
    """
    flow_id = _valid_flow_id(flow_id)
    if request.method == "GET":
        if reveal_is_fresh(flow_id):
            return _render_detail(flow_id, revealed=True)
        flash(_("State a purpose to see the full national id again."), "info")
        return redirect(url_for("flows.detail", flow_id=flow_id))
    form = RevealForm(settings().reveal_purposes)
    if not form.validate_on_submit():
        return _render_detail(flow_id, reveal_form=form), 400
    _retrieve(flow_id)  # a flow the service does not know (404) has nothing to reveal, and no reveal to record
    record_audit(current_user.username, "reveal_national_id", flow_id, purpose=form.stated_purpose)
    grant_reveal(flow_id, form.stated_purpose)  # the person's access log gets it with the page (below)
    return redirect(url_for("flows.reveal", flow_id=flow_id))


@bp.route("/new", methods=["GET", "POST"])
@role_required("operator")
def new():
    """Create a flow; a resent form (double click, reload) creates it once."""
    countries = settings().create_countries
    form = CreateFlowForm(countries, data=_create_defaults())
    if not countries:
        flash(_("No create scope is configured (FLOW_SCOPES), so no flow can be created."), "warning")
    elif form.validate_on_submit():
        # A resend (double click, Reload) goes on to its flow: the open flow asked about would be the one it created.
        if not (form.another_flow.data or created_or_creating(form.submission.data)):
            form.open_flows = _flows_waiting_for(form)
            if form.open_flows or form.check_refused:  # a second consent request for the person: asked first
                return _new_flow_page(form)
        return _create(form)
    elif form.submission.errors:  # sent without a usable token: the form as shown again gets one, for its next send
        form.submission.data = _new_submission_token()
    return _new_flow_page(form)


def _new_flow_page(form: CreateFlowForm, status: int = 200):
    """The New flow page, its form marked as the signed-in account's input."""
    form.typed_by.data = typist_mark(current_user.id)
    return render_template("flows/new.html", form=form), status


@bp.errorhandler(CSRFError)
def expired_form(error: CSRFError):
    """A create whose security token expired keeps what was typed, to be checked and sent again. A search whose
    token expired (a list left open past the token's hour, a sign-in in another tab) is still answered: its POST only
    leads to the search's address, whose own checks apply there (another site's request is asked "Continue?", and
    carries no session cookie here at all: SameSite=Lax). A re-check: "Your session expired" lost what was typed."""
    if request.endpoint == "flows.search_sent" and current_user.is_authenticated:
        return search_sent()
    if request.endpoint == "flows.new" and not current_user.is_authenticated:
        return sign_in_keeping_create_input() or csrf_error_page(error)
    if request.endpoint != "flows.new" or not current_user.can("operator"):
        return csrf_error_page(error)
    if not typed_by(current_user.id, request.form.get("typed_by")):  # another account signed in meanwhile
        flash(_("What was typed in the session that ended was another account's: it is not kept."), "info")
        return _new_flow_page(CreateFlowForm(settings().create_countries, formdata=None), 400)
    flash(
        _(
            "The form's security token expired, so nothing was sent. "
            "What you typed is kept: check it and select Create flow again."
        ),
        "warning",
    )
    return _new_flow_page(CreateFlowForm(settings().create_countries), 400)


def sign_in_keeping_create_input():
    """A New flow form sent after its session ended (signed out in another tab, idle, a role change): the sign-in
    page, carrying what was typed in the page itself; signed in, the form comes back with it. None for a form sent
    from another site, which must not put its words before someone who then signs in."""
    if request.endpoint != "flows.new" or request.method != "POST" or followed_from_another_site():
        return None
    typed = {field.short_name: request.form.get(field.short_name, "") for field in KeptCreateInput()}
    form = LoginForm(formdata=None, next=url_for("flows.new"), kept=typed)
    if not form.kept.holds_input():
        return None
    flash(_("You were signed out, so nothing was sent. Sign in to go on: what you typed is kept."), "warning")
    return render_template("auth/login.html", form=form), 401


bp.record_once(lambda _state: keep_input_when_signed_out("flows.new", sign_in_keeping_create_input))


def kept_create_form(kept: KeptCreateInput, signed_in_again: bool = True):
    """The New flow form as it was typed, with a fresh token: once signed in again after the session ended, or after
    its page's language was changed."""
    countries = settings().create_countries
    if not (countries and kept.holds_input()):
        return None
    if not typed_by(current_user.id, kept.typed_by.data):
        flash(_("What was typed in the session that ended was another account's: it is not kept."), "info")
        return None if current_user.can("operator") else redirect(url_for("flows.index"))
    if not current_user.can("operator"):  # the role changed meanwhile, which ended the session
        flash(_("Your role no longer lets you create flows, so what you typed was not sent."), "warning")
        return redirect(url_for("flows.index"))
    values = kept.typed() | {"submission": _new_submission_token()}
    form = CreateFlowForm(countries, formdata=None, data=values)
    if signed_in_again:
        flash(_("You are signed in again. What you typed is kept: check it and select Create flow."), "info")
    return _new_flow_page(form)


def _create_defaults() -> dict:
    if request.method == "POST":
        return {}
    return {
        "redirect_url": settings().redirect_url,
        "webhook_url": settings().webhook_url,
        "submission": _new_submission_token(),
    }


def _new_submission_token() -> str:
    return secrets.token_urlsafe(24)


def _create(form: CreateFlowForm):
    """Claim the form's token, send the flow, settle the token; then show the new flow."""
    try:
        earlier = claim_submission(form.submission.data, current_user.username)
    except SubmissionUnconfirmed as unconfirmed:
        return _resent_unconfirmed(form, unconfirmed.sent_at)
    except SubmissionInProgress:
        flash(
            _(
                "This form was sent already and the Flow Service has not confirmed it. "
                "Check the flow list before creating the flow again."
            ),
            "warning",
        )
        return redirect(url_for("flows.index"))
    if earlier:
        return redirect(url_for("flows.detail", flow_id=earlier))
    try:
        created = _send(form)
    except (ValidationFailed, Conflict) as error:
        forget_submission(form.submission.data)
        _attach_upstream_errors(form, error)
        return _new_flow_page(form, 409 if isinstance(error, Conflict) else 422)
    except FlowApiError as error:
        return _not_confirmed(form, error)
    saw_created(created, form.national_id.data, form.country.data, form.last_name.data.strip(), current_user.username)
    _audit_create(form, created)
    return _created(form.submission.data, created)


NEW_FLOW_FORM = "new flow form"  # where the person's open flows were seen, in their access log


def _flows_waiting_for(form: CreateFlowForm) -> list[FlowRecord]:
    """The flows of the form's person still waiting for their answer, as the index knows them; each look at them
    is in the person's access log."""
    number = read_national_id(form.national_id.data, form.country.data)
    if number is None:
        return []
    person = number.keyed_hash(settings().index_key)
    try:  # a look-up by national id like a search: counted against the same limit, so no free oracle either
        verdict = _person_looked_up(person)
    except ThrottleUnavailable:
        verdict = False
    if verdict is False or (verdict is not None and not verdict.allowed):
        form.check_refused = True  # not looked up: asked about as if a flow could be waiting
        return []
    waiting = open_flows_of(person)
    if waiting:
        record_access(person, SEARCH, NEW_FLOW_FORM)
    return waiting


def _audit_create(form: CreateFlowForm, created) -> None:
    person = mask_national_id(form.national_id.data)
    another = " · another flow for the person, asked for" if form.another_flow.data else ""
    named = _named(created.reference_id if not created.flow_id else None, created.flow_id)
    named = named or "a flow the service did not name"
    record_audit(current_user.username, "create_flow", f"{named} ({person}){another}")


def _named(reference: str | None, flow_id: str | None) -> str | None:
    """A flow as a message names it: its reference, else its id, either masked where it reads as a national id (an
    attack: a service whose references are national ids had "Flow 15108695088 was created." said)."""
    if reference:
        return mask_text(reference)
    return mask_flow_id(flow_id) if flow_id else None


def _created(token: str, created):
    """Settle the form's token and show the new flow (or the list, if the service named no id)."""
    if not created.flow_id:
        # Accepted (2xx) without an id: created, so the token stays claimed and a resend cannot repeat it.
        if created.unusable_id:
            said = _(
                "The Flow Service accepted the flow but named it by an id the portal cannot open (%(id)s): find it "
                "in the flow list.",
                id=quoted(created.unusable_id),
            )
        elif created.reference_id:
            said = _(
                "The Flow Service accepted the flow %(reference)s but did not say its id: find it in the flow list.",
                reference=mask_text(created.reference_id),
            )
        else:
            said = _(
                "The Flow Service accepted the flow but did not say its id or reference: find it in the flow list."
            )
        flash(said, "success")
        return redirect(url_for("flows.index"))
    settle_submission(token, created.flow_id, created.reference_id)
    named = _named(created.reference_id, created.flow_id)  # a flash lives in the session cookie a while
    flash(_("Flow %(reference)s was created.", reference=named), "success")
    return redirect(url_for("flows.detail", flow_id=created.flow_id))


def _send(form: CreateFlowForm):
    return flow_client().create_flow(
        form.national_id.data,
        form.last_name.data.strip(),
        form.redirect_url.data.strip(),
        (form.webhook_url.data or "").strip(),
    )


def _not_confirmed(form: CreateFlowForm, error: FlowApiError):
    """A failed create, with the form kept: "not created" when that is sure, else "may have been"."""
    if _surely_not_created(error):
        forget_submission(form.submission.data)
        flash(
            _(
                "The flow was not created: %(problem)s You can send the form again%(when)s.%(support)s",
                problem=_problem_in_words(error),
                when=_(" in %(seconds)d seconds", seconds=math.ceil(error.retry_after))
                if isinstance(error, RateLimited) and error.retry_after
                else "",
                support=_(" (for support: %(code)s)", code=error.support_code) if error.support_code else "",
            ),
            "danger",
        )
        return _new_flow_page(form, upstream_status(error))
    # The service may have created the flow and failed to answer: keeping the token means
    # sending this form again cannot create a second one; it looks for the flow first (`_resent_unconfirmed`).
    mark_unconfirmed(form.submission.data)
    flash(
        _(
            "The Flow Service did not confirm the flow. It may have been created. Send this form again in a few "
            "minutes: the portal then looks for the flow in the service's list first, and creates it only if it "
            "is not there."
        ),
        "warning",
    )
    return _new_flow_page(form, 504)


def _resent_unconfirmed(form: CreateFlowForm, sent_at: datetime):
    """The form sent again after the service did not confirm it: the flow list says whether it was created."""
    token = form.submission.data
    if portal_now() - sent_at < SETTLE:  # the service may still be working on the request the portal gave up on
        return _kept_unconfirmed(
            form,
            _(
                "This form was sent less than two minutes ago and the Flow Service did not confirm it: it may still "
                "be creating the flow. Check the flow list, or send the form again in a few minutes."
            ),
        )
    try:
        found = _created_since(form.national_id.data, sent_at)
    except FlowApiError:
        found = UNSURE
    if isinstance(found, FlowSummary) and found.id:
        settle_submission(token, found.id, found.reference_id)
        shown = _named(found.reference_id, found.id)
        flash(_("The Flow Service had created flow %(reference)s after all; it was not sent again.", reference=shown))
        return redirect(url_for("flows.detail", flow_id=found.id))
    if found is NOT_CREATED:
        forget_submission(token)
        return _create(form)
    return _kept_unconfirmed(
        form,
        _(
            "This form was sent before and the Flow Service did not confirm it, and its flow list does not show "
            "whether it was created. Check the flow list before creating the flow again."
        ),
    )


def _kept_unconfirmed(form: CreateFlowForm, message: str):
    """The form as typed, not sent again, with why."""
    flash(message, "warning")
    return _new_flow_page(form, 409)


NOT_CREATED, UNSURE = "not created", "unsure"
# How long after a create the portal gave up on it a resend may conclude from the list: a request a client gave up
# on may still be carried out by the service for a while.
SETTLE = timedelta(minutes=2)
NEWEST_LOOKED_AT = 50  # the newest flows a resend looks through for the one it may have created
CLOCK_SKEW = timedelta(minutes=2)  # between the portal's clock and the service's createdAt


def _created_since(national_id: str, sent_at: datetime) -> FlowSummary | str:
    """This person's flow the service created since `sent_at`; NOT_CREATED when the newest page shows every flow
    created since then and none is theirs; UNSURE when it cannot tell (items without an id, a national id or a
    creation time, or more flows created since than one page holds; a flow created since whose national id
    cannot be read, as when the list masks it)."""
    person, since = read_national_id(national_id), sent_at - CLOCK_SKEW
    page = flow_client().list_flows(limit=NEWEST_LOOKED_AT)
    if person is None or not all(item.id and item.created_at for item in page.items):
        return UNSURE
    created_since = [item for item in page.items if item.created_at and item.created_at >= since]
    people = [
        read_national_id(item.national_id, person.country) or read_national_id(item.national_id)
        for item in created_since
    ]
    for item, found in zip(created_since, people, strict=True):
        if found is not None and (found.country, found.canonical) == (person.country, person.canonical):
            return item
    if None in people:  # one of them may be this person's flow
        return UNSURE
    # Newest first (DESIGN): a flow created before the first send, or the end of the list, means none was missed. Not
    # an end the service contradicts with a next page of its own (a stand-in: "no more", and a next link).
    reaches_back = len(created_since) < len(page.items)
    at_the_end = page.has_more is False and not page.names_a_next_page
    return NOT_CREATED if reaches_back or at_the_end else UNSURE


def _problem_in_words(error: FlowApiError) -> str:
    """Why the service refused, in a sentence: its own words, except where the portal knows what a refusal means
    (a rate limit: said in the reader's language, with when to send again beside it)."""
    if isinstance(error, RateLimited):
        return as_sentence(upstream_title(error))
    return as_sentence(error.reason) if error.reason else upstream_explained(error)


def _surely_not_created(error: FlowApiError) -> bool:
    """True when the request cannot have reached the service, or the service said no."""
    refused = (Unauthorized, InsufficientScope, RateLimited, NotFound, EndpointNotFound, Conflict)
    never_sent = error.code in ("unreachable", "connect_timeout", "tls")
    return not error.reached_api or never_sent or isinstance(error, refused)


# The service's field names, lower case without separators ("lastName", "last_name", "lastname").
UPSTREAM_FIELDS = {
    "nationalid": "national_id",
    "lastname": "last_name",
    "redirecturl": "redirect_url",
    "webhookurl": "webhook_url",
}


def _attach_upstream_errors(form: CreateFlowForm, error: ValidationFailed | Conflict) -> None:
    """Put each of the service's field errors under the field it is about."""
    unplaced = []
    for detail in error.details:
        name = UPSTREAM_FIELDS.get(detail.field.replace("_", "").replace("-", "").lower(), "")
        field = getattr(form, name, None)
        if field is not None:
            field.errors = [*field.errors, _("The Flow Service says: %(message)s", message=detail.message)]
        else:  # named as the service named it: "weird" alone said nothing (a stand-in)
            unplaced.append(f"{detail.field}: {detail.message}" if detail.field else detail.message)
    said = _words_about_the_whole(error)
    reasons = [said] if said and said not in unplaced else []
    if reasons or unplaced:
        reasons_said = "; ".join([*reasons, *unplaced])
        flash(_("The Flow Service did not accept the flow: %(reasons)s", reasons=reasons_said), "danger")
    elif not error.details:  # "did not accept the flow: The Flow Service did not accept that." said it twice
        flash(
            _(
                "The Flow Service did not accept the flow and did not say why (for support: %(code)s).",
                code=error.support_code or requestid.current(),
            ),
            "danger",
        )


def _words_about_the_whole(error: ValidationFailed | Conflict) -> str | None:
    """The service's reason when it is its own words about the request ("Validation failed", a detail): dropped
    beside field complaints, they were lost (a stand-in); None when the reason is only those complaints again."""
    made_of_complaints = (
        "; ".join(f"{detail.field}: {detail.message}" for detail in error.details),
        "; ".join(detail.message for detail in error.details if not detail.field),
    )
    return None if error.reason in made_of_complaints else error.reason
