"""The flow pages against an independently written Flow Service (tests/altservice.py), switch by switch.

Whatever the service chooses where the spec is silent, the pages never loop, never hide flows without
a word, never answer 500 and never show the service's internals.
"""

import itertools
import math
import re
import time
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from html import unescape

import pytest
from alt_fixtures import app, sandbox  # noqa: F401 - the portal in front of the alternative service
from altservice import (
    BLOCKED_REASON,
    CONFLICT_REASON,
    LAST_NAME_REASON,
    OTHER_FLOW_ID,
    SCOPE_REFUSAL,
    SECRET_REFUSAL,
    AltService,
    national_ids,
)
from altservice import (
    PORTAL_SETTINGS as ALT_SETTINGS,
)
from sqlalchemy import func, select, update
from support import add_user, create_form, deliver_signed, form_data, sign_in, wait_until

from portal.extensions import db
from portal.models import AuditEntry, FlowRecord
from portal.presentation import local_time

REDIRECTS = (301, 302, 303, 307, 308)
MAX_HOPS = 3
FLOW_ROW = re.compile(r'<tr[^>]*\bdata-flow-id="([^"]+)"')
NEXT_LINK = re.compile(r'<a\b[^>]*\brel="next"[^>]*>')
HREF = re.compile(r'\bhref="([^"]*)"')
NOTICE = 'data-testid="list-notice"'
REFERENCE = re.compile(r"\bAL-(\d+)\b")
TIME = re.compile(r'<time\b[^>]*\bdatetime="([^"]+)"')
INTERNALS = ("java.lang", "\tat ", ".java:")
READABLE_STYLES = ("design", "problem", "errors_array", "rails", "google", "fastapi", "bare_array")
STYLES = (*READABLE_STYLES, "java", "text")
LIMIT_REASON = "limit must be between 1 and 5"


# -- fixtures and helpers ----------------------------------------------------------------------


@pytest.fixture
def staff(signed_in):
    return signed_in("operator")


class RedirectLoop(AssertionError):
    pass


def get(client, url: str):
    """GET `url`, following at most three redirects; a longer chain fails the test."""
    page, chain = client.get(url), [url]
    while page.status_code in REDIRECTS:
        chain.append(page.headers["Location"])
        if len(chain) > MAX_HOPS + 1:
            raise RedirectLoop(f"more than {MAX_HOPS} redirects: {' -> '.join(chain)}")
        page = client.get(chain[-1])
    return page


def next_href(page) -> str | None:
    link = NEXT_LINK.search(page.text)
    return unescape(HREF.search(link[0])[1]) if link and HREF.search(link[0]) else None


def internals(page) -> list[str]:
    return [marker for marker in INTERNALS if marker in page.text]


def assert_sound(page, allowed=()):
    """Not a 500 (502/503/504 are honest about an upstream), and nothing of the service's insides."""
    assert page.status_code < 500 or page.status_code in (502, 503, 504, *allowed), page.status_code
    assert not internals(page), f"upstream internals shown: {internals(page)}"


def walk(client, start: str, cap: int) -> dict:
    """Follow Next from `start` for at most `cap` pages; what was seen on the way."""
    seen = {"ids": [], "notices": 0, "pages": 0, "problems": [], "numbers": set(), "looped": False}
    url = start
    while url:
        if seen["pages"] == cap:
            seen["looped"] = True
            seen["problems"].append(f"Next still offered after {cap} pages (at {url})")
            break
        try:
            page = get(client, url)
        except RedirectLoop as loop:
            seen["problems"].append(str(loop))
            break
        seen["pages"] += 1
        if page.status_code >= 500:
            seen["problems"].append(f"{url} answered {page.status_code}")
        if internals(page):
            seen["problems"].append(f"{url} shows upstream internals {internals(page)}")
        seen["ids"] += FLOW_ROW.findall(page.text)
        seen["notices"] += page.text.count(NOTICE)
        seen["numbers"] |= {int(number) for number in REFERENCE.findall(page.text)}
        url = next_href(page)
    return seen


def walk_cap(alt: AltService) -> int:
    return 2 * math.ceil(alt.options.current / 10) + 3


def exactly_once(seen_ids: list[str], expected: list[str]) -> str | None:
    """None when each expected id was seen once and nothing else; else what went wrong."""
    duplicates = sorted({flow_id for flow_id in seen_ids if seen_ids.count(flow_id) > 1})
    missing, extra = set(expected) - set(seen_ids), set(seen_ids) - set(expected)
    if not (duplicates or missing or extra):
        return None
    return f"{len(missing)} missing, {len(extra)} unexpected, {len(duplicates)} shown twice"


def archived_numbers(alt: AltService) -> set[int]:
    return {flow.number for flow in alt.flows if flow.archived}


def check_combination(client, alt: AltService) -> list[str]:
    """Walk both tabs under the service's current switches; every broken promise, in words."""
    options, problems = alt.options, []
    calls_before = alt.counts["list"]
    current = walk(client, "/flows", walk_cap(alt))
    problems += current["problems"]
    calls = alt.counts["list"] - calls_before
    if calls > 2 * current["pages"]:
        problems.append(f"{calls} list calls for {current['pages']} pages")
    leaked = current["numbers"] & archived_numbers(alt) or set(current["ids"]) & set(alt.archived_ids())
    if leaked:
        problems.append(f"Current tab shows archived flows {sorted(leaked)}")
    if options.items == "full":
        wrong = exactly_once(current["ids"], alt.current_ids())
        first_page = set(alt.current_ids()[:10])
        if options.paging != "ignore_cursor" and wrong:
            problems.append(f"Current flows not each reachable once ({wrong}; {current['pages']} pages)")
        elif options.paging == "ignore_cursor" and wrong and not current["notices"]:
            problems.append(f"service ignores the cursor, walk {wrong}, and no list-notice says so")
        if not first_page <= set(current["ids"]):
            problems.append("the first page's flows are not all listed")
    else:
        if current["ids"]:
            problems.append(f"rows link flows although the service gave no ids: {current['ids'][:3]}")
        if not current["notices"]:
            problems.append(f"list items are {options.items!r} and no list-notice says why nothing links")
    archived = walk(client, "/flows?archived=true", walk_cap(alt))
    problems += [f"archived tab: {problem}" for problem in archived["problems"]]
    if options.items == "full":
        wrong = exactly_once(archived["ids"], alt.archived_ids())
        if wrong:
            problems.append(f"archived tab does not list exactly the archived flows ({wrong})")
    return problems


# -- the list, every paging choice -------------------------------------------------------------

PAGINGS = ("cursor", "cursor_inclusive", "ignore_cursor", "next_cursor", "next_link", "links_next", "offset")
HAS_MORE = ("bool", "missing", "string")
SHAPES = [(items, default) for items in ("full", "no_id", "empty") for default in ("current", "all")]


@pytest.mark.parametrize("paging", PAGINGS, ids=[f"paging={value}" for value in PAGINGS])
def test_list_walk_reaches_every_flow_once_or_says_why(staff, alt, paging):
    """Each has_more style, item shape and archived default in turn (switches flipped, one portal):
    no loop, no 500, no archived flow in Current, every flow once or a notice saying why not."""
    broken = []
    for has_more in HAS_MORE:
        for items, archived_default in SHAPES:
            alt.set(paging=paging, has_more=has_more, items=items, archived_default=archived_default)
            combination = f"has_more={has_more} items={items} archived_default={archived_default}"
            broken += [f"{combination}: {problem}" for problem in check_combination(staff, alt)]
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("status", [404, 410])
def test_an_archived_flow_the_service_no_longer_retrieves_leads_to_what_the_portal_heard(staff, alt, status):
    alt.set(archived_retrieve=status)
    archived = alt.by_number(next(flow.number for flow in alt.flows if flow.archived))
    get(staff, "/flows?archived=true")
    wait_until(lambda: consent_in_index(staff, archived.id) is not None, "the archived list indexed")
    page = get(staff, f"/flows/{archived.id}")
    assert page.status_code == 404 and 'data-testid="heard-of"' in page.text
    assert f'href="/events?flow={archived.id}"' in page.text
    unknown = get(staff, f"/flows/{uuid.uuid4()}")
    assert unknown.status_code == 404 and 'data-testid="heard-of"' not in unknown.text


def test_an_archived_list_that_holds_the_current_flows_does_not_archive_them(staff, alt):
    """A service that ignores `archived`: its archived tab listed the current flows, each row said archived, and
    the index stored them archived, so their own pages said so too."""
    current = alt.by_number(next(flow.number for flow in alt.flows if not flow.archived))
    get(staff, "/flows")
    wait_until(lambda: consent_in_index(staff, current.id) is not None, "the current list indexed")
    alt.set(ignore_archived=True)
    page = get(staff, "/flows?archived=true")
    assert "it may not filter by archived" in page.text
    row = re.search(rf'<tr[^>]*data-flow-id="{current.id}".*?</tr>', page.text, re.DOTALL)[0]
    assert 'data-archived="yes"' not in row
    assert staff.application.extensions["flow_index"].flush(), "the archived tab's rows written"
    with staff.application.app_context():
        assert db.session.scalar(select(FlowRecord.archived).where(FlowRecord.flow_id == current.id)) is False


def test_an_archived_tab_asked_first_that_holds_the_current_flows_does_not_archive_them(staff, alt):
    """The same on the first look, before the index had listed current flows (after start, or an hour later): the
    check had nothing to compare with, and every current flow read archived (found by a stand-in). The current
    list's first page is asked for once and compared."""
    current = next(flow for flow in alt.flows if not flow.archived)
    alt.set(ignore_archived=True)
    page = get(staff, "/flows?archived=true")
    assert "it may not filter by archived" in page.text
    row = re.search(rf'<tr[^>]*data-flow-id="{current.id}".*?</tr>', page.text, re.DOTALL)[0]
    assert 'data-archived="yes"' not in row
    wait_until(lambda: consent_in_index(staff, current.id) is not None, "the current page indexed")
    lists = alt.counts["list"]
    get(staff, "/flows?archived=true")
    assert alt.counts["list"] - lists == 1, "the tab alone: the index has the current list now"


def test_an_archived_tab_asked_first_from_a_service_that_filters_costs_no_more_than_one_look(staff, alt):
    page = get(staff, "/flows?archived=true")
    assert "it may not filter by archived" not in page.text
    archived = next(flow for flow in alt.flows if flow.archived)
    row = re.search(rf'<tr[^>]*data-flow-id="{archived.id}".*?</tr>', page.text, re.DOTALL)[0]
    assert 'data-archived="yes"' in row


def test_a_flow_whose_answer_names_another_person_than_the_list_says_so(staff, alt):
    flow = alt.by_number(42)
    get(staff, "/flows?limit=100")
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    page = get(staff, f"/flows/{flow.id}")
    assert 'data-testid="list-disagrees"' not in page.text, "nothing to say when they agree"
    alt.set(detail="disagreeing")
    page = get(staff, f"/flows/{flow.id}")
    assert "The Flow Service&#39;s list names another person for this flow than its answer here does." in page.text
    assert (
        f"gives this flow the reference {flow.reference_id}; its answer here gives AL-{flow.number + 500}." in page.text
    )
    assert staff.application.extensions["flow_index"].flush(), "the detail's answer written"
    again = get(staff, f"/flows/{flow.id}")
    assert f"gives this flow the reference {flow.reference_id}; its answer here" in again.text, "said at every view"
    with staff.application.app_context():
        listed = db.session.scalar(select(FlowRecord.reference_id).where(FlowRecord.flow_id == flow.id))
    assert listed == flow.reference_id, "the index keeps the list's reference"


def test_a_flow_answered_under_another_id_stays_the_flow_asked_for_and_says_so(staff, alt):
    """The retrieve answer's flowId won over the id asked for: the page lost the flow's consent status, its events
    and its index row, and Refresh led to "Flow not found" (found by a stand-in service)."""
    flow = alt.by_number(42)
    get(staff, "/flows?limit=100")
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    alt.set(detail="other_id")
    page = get(staff, f"/flows/{flow.id}")
    assert f"Asked for the flow {flow.id}, the Flow Service answered with a flow it calls {OTHER_FLOW_ID}." in page.text
    assert f'action="/flows/{flow.id}/refresh"' in page.text
    assert "(not known yet)" not in page.text, "the list's consent status for the flow asked for"
    assert staff.application.extensions["flow_index"].flush()
    with staff.application.app_context():
        assert db.session.scalar(select(FlowRecord.id).where(FlowRecord.flow_id == OTHER_FLOW_ID)) is None
    alt.set(detail="upper_id")
    assert "answered with a flow it calls" not in get(staff, f"/flows/{flow.id}").text, "a letter case is no other"


def test_an_event_that_spells_the_reference_otherwise_does_not_make_the_list_seem_to_say_so(staff, alt):
    """An event's "AL-0042" replaced the list's reference in the index, and the flow's page then said the list gave
    AL-0042 (found by a stand-in service); a right-to-left override in it went into that sentence unnamed."""
    flow = alt.by_number(42)
    get(staff, "/flows?limit=100")
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    event = {"type": "flow.status_changed", "timestamp": datetime.now(UTC).isoformat()}
    data = {"flowId": flow.id, "referenceId": "AL-0042", "status": "Opened"}
    assert deliver_signed(staff.application, event | {"id": str(uuid.uuid4()), "data": data}).status_code < 300
    assert staff.application.extensions["flow_index"].flush()
    page = get(staff, f"/flows/{flow.id}")
    assert 'data-testid="list-disagrees"' not in page.text
    with staff.application.app_context():  # as a list that sent it would have left it
        db.session.execute(update(FlowRecord).where(FlowRecord.flow_id == flow.id).values(reference_id="AL-42\u202e"))
        db.session.commit()
    alt.set(detail="disagreeing")
    page = get(staff, f"/flows/{flow.id}")
    assert "gives this flow the reference AL-42[U+202E]; its answer here gives AL-542." in page.text


def test_an_event_naming_the_flow_s_uuid_in_capitals_is_the_flow_s_event(staff, alt):
    """Events whose flowId was the flow's UUID in capitals never showed on its page, and made the index a second
    flow (found by a stand-in service)."""
    flow = alt.by_number(42)
    get(staff, "/flows?limit=100")
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    data = {"flowId": flow.id.upper(), "status": "Accepted", "previousStatus": "Opened"}
    event = {"id": str(uuid.uuid4()), "type": "flow.status_changed", "timestamp": datetime.now(UTC).isoformat()}
    assert deliver_signed(staff.application, event | {"data": data}).status_code < 300
    assert staff.application.extensions["flow_index"].flush()
    page = get(staff, f"/flows/{flow.id}")
    assert "No webhook events received for this flow yet" not in page.text
    assert 'data-testid="timeline"' in page.text
    listed = get(staff, f"/events?flow={flow.id}")  # the flow page's "All events of this flow" (found by a re-check)
    assert "events-table" in listed.text and "No events match these filters." not in listed.text
    with staff.application.app_context():
        rows = db.session.scalars(select(FlowRecord.flow_id).where(func.lower(FlowRecord.flow_id) == flow.id)).all()
    assert rows == [flow.id], "one flow in the index, under the list's spelling"


def test_a_decision_the_list_shows_is_dated_by_the_flow_s_last_change_not_by_when_the_portal_first_saw_it(staff, alt):
    """ "Consent status Accepted since" gave the time of the portal's first list fetch, days after the flow's last
    change (found by a stand-in service): the answer's updatedAt bounds it, and the page says "by"."""
    flow = next(flow for flow in alt.flows if flow.status == "Accepted" and not flow.archived)
    get(staff, "/flows?limit=100")
    wait_until(lambda: consent_in_index(staff, flow.id) == "Accepted", "the list indexed")
    get(staff, f"/flows/{flow.id}")
    assert staff.application.extensions["flow_index"].flush()
    page = get(staff, f"/flows/{flow.id}")
    with staff.application.test_request_context():
        when = local_time(flow.updated_at, seconds=True)
    assert f"Consent status Accepted since {when} or earlier" in page.text


def test_an_event_redelivered_under_a_new_delivery_id_shows_once_on_the_timeline(staff, alt):
    """A sender that redelivers an event as a new message (a new webhook-id, the same body) put it on the flow's
    timeline twice (found by a stand-in service); both deliveries stay stored."""
    flow = alt.by_number(42)
    event = {"id": str(uuid.uuid4()), "type": "flow.status_changed", "timestamp": datetime.now(UTC).isoformat()}
    event["data"] = {"flowId": flow.id, "status": "Opened"}
    for _ in range(2):
        assert deliver_signed(staff.application, event).status_code < 300
    page = get(staff, f"/flows/{flow.id}")
    timeline = re.search(r'data-testid="timeline">(.*?)</ol>', page.text, re.DOTALL)[1]
    assert timeline.count("<li") == 1 and "received 2 times" in timeline


def test_a_national_id_on_the_flow_object_is_read_like_one_under_data(staff, alt):
    alt.set(detail="id_on_flow")
    flow = alt.by_number(42)
    page = get(staff, f"/flows/{flow.id}")
    masked = flow.national_id[:6] + "•" * 5
    assert masked in page.text and 'name="purpose"' in page.text, "shown masked, and the reveal offered"


def test_a_long_continuation_token_leads_to_the_next_page(staff, alt):
    """A next_cursor of ~600 characters was refused as a page position over 512: Next led back to the first page,
    which the portal then blamed on the service (found by a stand-in service)."""
    alt.set(paging="next_cursor", cursor_padding=1200)
    first = get(staff, "/flows")
    second = get(staff, next_href(first))
    assert "That page position is not valid" not in second.text and "ignores the page position" not in second.text
    assert FLOW_ROW.findall(second.text) == [flow.id for flow in alt.flows if not flow.archived][10:20]


def test_a_continuation_token_too_long_for_an_address_is_said_and_not_offered(staff, alt):
    alt.set(paging="next_cursor", cursor_padding=4000)
    page = get(staff, "/flows")
    assert next_href(page) is None
    assert "position for the next page is too long to go into an address" in page.text


def test_a_position_refused_as_malformed_is_not_blamed_on_the_service(staff, alt):
    alt.set(paging="next_cursor")
    seen = re.search(r"seen=([0-9a-f]+)", next_href(get(staff, "/flows")))[1]  # the first page's fingerprint
    page = get(staff, f"/flows?at=cursor%3D{'x' * 3000}&seen={seen}")
    assert "That page position is not valid; showing the first page." in page.text
    assert "ignores the page position" not in page.text


def test_an_answer_without_end_is_cut_off_at_its_limit_with_an_error_page(staff, alt):
    """A list answer that never ended was read for as long as it came, into the worker's memory (found by a
    stand-in service); the token answer the same."""
    alt.set(list_body="endless")
    page = get(staff, "/flows")
    assert "The Flow Service sent something unexpected, so these flows come from the portal&#39;s index" in page.text
    assert "too_large" in page.text, "the code support is told"
    alt.set(list_body="whole")
    assert get(staff, "/flows").status_code == 200, "the next answer is read as ever"


def test_a_list_answer_of_a_shape_the_portal_cannot_read_is_logged_with_its_support_code(staff, alt, caplog):
    """`"data": null`: the index instead, as for any failure, but with no support code on the page and no line in
    the log, nothing told support what the service had sent (a helper's stand-in)."""
    alt.set(list_body="data_null")
    page = get(staff, "/flows")
    assert "The Flow Service sent something unexpected, so these flows come from the portal&#39;s index" in page.text
    code = re.search(r"\(for support: ([^)]+)\)", page.text)
    assert code and code[1].startswith("unreadable_answer · "), "a code and the request id the service was sent"
    logged = [record.getMessage() for record in caplog.records if "flow service error" in record.getMessage()]
    assert logged and "no data array" in logged[-1] and unescape(code[1]) in unescape(logged[-1]), logged
    alt.set(list_body="whole")


def test_an_identity_provider_answer_without_end_is_cut_off_at_its_limit(staff, alt):
    alt.set(token="endless")
    page = get(staff, "/flows")
    assert page.status_code == 502 and "identity provider sent something unexpected" in page.text
    assert "token_too_large" in page.text


def test_a_token_endpoint_that_redirects_is_not_followed_with_the_client_secret(staff, alt):
    """The token request followed a 307 to wherever it pointed and sent the client id and secret there (found by a
    stand-in service): the API's calls refused redirects, the identity provider's did not."""
    alt.set(token="redirect")
    page = get(staff, "/flows")
    assert alt.counts["elsewhere"] == 0, "the secret stayed home"
    assert alt.counts["token"] >= 1 and alt.counts["list"] == 0
    assert "token_redirect" in page.text
    assert_sound(page)


def test_a_list_item_s_flow_id_is_its_flow_id_not_its_row_number(staff, alt):
    """Items carrying a row number as `id` beside the UUID `flowId` linked to /flows/<number>, a flow not found."""
    alt.set(items="numbered")
    page = get(staff, "/flows")
    flow = alt.flows[0]
    assert f'href="/flows/{flow.id}"' in page.text and f'href="/flows/{flow.number}"' not in page.text
    assert get(staff, f"/flows/{flow.id}").status_code == 200


def test_an_answer_in_the_charset_it_names_is_read(staff, alt):
    """A flow answered in ISO-8859-1, said so in its Content-Type, was refused as not JSON (found by a stand-in)."""
    flow = alt.flows[0]
    flow.last_name = "Øvregård"
    alt.set(detail="latin1")
    page = get(staff, f"/flows/{flow.id}")
    assert page.status_code == 200 and "Øvregård" in page.text


def test_a_cancelled_flow_spelt_the_american_way_is_cancelled(staff, alt):
    """ "canceled" was shown as it came and the flow counted as still running: in the stuck list, as an open flow
    of the person (found by a stand-in service)."""
    flow = next(flow for flow in alt.flows if flow.archived)
    alt.set(detail="american")
    page = get(staff, f"/flows/{flow.id}")
    assert page.status_code == 200

    def lifecycle():
        with staff.application.app_context():
            return db.session.scalar(select(FlowRecord.lifecycle).where(FlowRecord.flow_id == flow.id))

    assert wait_until(lifecycle, "the flow page indexed") == "cancelled"


def test_an_answer_that_trickles_in_ends_at_the_read_timeout_not_at_its_last_byte(make_app, alt):
    """requests bounds each read from the socket by the read timeout, not the whole body: 8 bytes every 50 ms kept a
    worker for minutes."""
    portal = make_app(sandbox_url=alt.url, **ALT_SETTINGS, WTF_CSRF_ENABLED=False, FLOW_READ_TIMEOUT="0.3")
    client = portal.test_client()
    assert sign_in(client, add_user(portal, role="operator")).status_code == 302
    alt.set(list_body="trickle")
    page = get(client, "/flows")
    assert "The Flow Service is slow, so these flows come from the portal&#39;s index" in page.text
    assert alt.counts["list"] == 1, "a timed-out read is not tried again"


def test_a_page_with_more_flows_than_asked_for_shows_as_many_as_asked_and_goes_on_from_there(staff, alt):
    """A page answered with 20,010 flows for 10 made an HTML page of 29 MB (found with a stand-in service)."""
    alt.set(oversized=3)
    current = [flow.id for flow in alt.flows if not flow.archived]
    page = get(staff, "/flows")
    sent = min(30, len(current))
    assert f"The Flow Service sent {sent} flows where 10 were asked for: the first 10 are shown" in page.text
    assert [flow_id for flow_id in current if f'href="/flows/{flow_id}"' in page.text] == current[:10]
    following = get(staff, unescape(re.search(r'<a class="page-link" rel="next" href="([^"]+)"', page.text)[1]))
    assert [flow_id for flow_id in current if f'href="/flows/{flow_id}"' in following.text] == current[10:20]


def test_a_page_with_more_flows_than_asked_behind_its_own_next_position_shows_them_all_and_says_so(staff, alt):
    """Cut, the flows past the page size could not be asked for again (the service's next page goes on after the
    last it sent): all are shown, as before, but it was unsaid (a stand-in: 5,000 rows for 10)."""
    alt.set(oversized=2, paging="next_cursor")
    current = [flow.id for flow in alt.flows if not flow.archived]
    page = get(staff, "/flows")
    assert "The Flow Service sent 20 flows where 10 were asked for: all are shown" in page.text
    assert [flow_id for flow_id in current if f'href="/flows/{flow_id}"' in page.text] == current[:20]


def test_a_page_far_bigger_than_asked_behind_its_own_next_position_is_cut_and_says_how_many_are_not_shown(
    staff, alt, monkeypatch
):
    monkeypatch.setattr("portal.listing.MOST_ROWS", 15)
    alt.set(oversized=2, paging="next_cursor")
    current = [flow.id for flow in alt.flows if not flow.archived]
    page = get(staff, "/flows")
    said = "sent 20 flows where 10 were asked for: the first 15 are shown, and the other 5 cannot be"
    assert said in page.text
    assert [flow_id for flow_id in current if f'href="/flows/{flow_id}"' in page.text] == current[:15]


def test_a_list_whose_json_begins_with_a_byte_order_mark_is_read(staff, alt):
    alt.set(byte_order_mark=True)
    page = get(staff, "/flows")
    assert page.status_code == 200 and f'href="/flows/{alt.current_ids()[0]}"' in page.text


def test_going_back_on_a_service_that_ignores_the_position_ends(staff, alt):
    """Previous on a service that ignores ending_before led to the newest page, whose Previous led to itself."""
    alt.set(paging="ignore_before")
    page = get(staff, "/flows")
    for _ in range(2):  # on to page 3
        page = get(staff, unescape(re.search(r'<a class="page-link" rel="next" href="([^"]+)"', page.text)[1]))
    for clicks in range(1, 6):
        back = re.search(r'<a class="page-link" rel="prev" href="([^"]+)"', page.text)
        if back is None:
            break
        page = get(staff, unescape(back[1]))
    assert clicks <= 3, "Previous kept leading somewhere"
    assert "The Flow Service ignores the position to go back from" in page.text


def test_a_uuid_whose_digits_read_as_a_national_id_is_listed_whole(staff, alt):
    """Staff copy the id from the list: a UUID is shown as it is (one in 8,000 holds digits like an id)."""
    flow_id = "4014c8ed-cd15-4e9e-bf57-ff2203813460"
    alt.flows[0].id = flow_id
    page = get(staff, "/flows")
    row = re.search(rf'<tr data-flow-id="{flow_id}">.*?</tr>', page.text, re.DOTALL)
    assert row and f'data-copy="{flow_id}"' in row[0] and f'title="{flow_id}"' in row[0], "shown, kept and copied whole"


def test_current_tab_asks_for_unarchived_flows_explicitly(staff, alt):
    """A service that lists everything when `archived` is absent must still give Current only current flows."""
    alt.set(archived_default="all", items="empty")
    assert_sound(get(staff, "/flows"))
    asked = alt.asked("list")
    assert asked and all(seen.args.get("archived", "").lower() == "false" for seen in asked), [s.args for s in asked]


def test_stale_position_leads_back_to_a_page_once(staff, alt):
    """The flow a Next link starts after is gone (archived meanwhile): one redirect at most, then flows."""
    second = next_href(get(staff, "/flows"))
    assert second, "a full first page offers Next"
    with alt.lock:
        alt.find(alt.current_ids()[9]).archived = True
    calls = alt.counts["list"]
    page = get(staff, second)
    assert_sound(page)
    assert page.status_code == 200
    assert FLOW_ROW.findall(page.text), "flows are shown, not an error"
    assert alt.counts["list"] - calls <= 3


# -- a refused page size -----------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_refused_page_size_falls_back_to_ten_once(staff, alt, style):
    alt.set(max_limit=10, error_style=style)
    page = get(staff, "/flows?limit=25")
    assert_sound(page)
    assert FLOW_ROW.findall(page.text) == alt.current_ids()[:10]
    assert NOTICE in page.text
    assert alt.counts["list"] <= 3, f"{alt.counts['list']} list calls for one page"
    if style in READABLE_STYLES:  # the notice gives the service's own words for the refusal
        notice = re.search(r'data-testid="list-notice">([^<]*)<', page.text)[1]
        assert notice.startswith("The Flow Service refused 25 flows per page, so 10 are shown. It said: ")
        assert notice.endswith("limit must be between 1 and 10")


@pytest.mark.parametrize("style", STYLES)
def test_refused_default_page_size_says_what_was_refused(staff, alt, style):
    """Even 10 is refused: one page saying so (the service's reason, or a support code), no loop, no 500."""
    alt.set(max_limit=5, error_style=style)
    page = get(staff, "/flows")
    assert_sound(page)
    assert alt.counts["list"] <= 3, f"{alt.counts['list']} list calls for one page"
    if style in READABLE_STYLES:
        assert LIMIT_REASON in page.text
    if style == "java":
        shown = [word for word in ("java.lang", "Exception", "FlowController") if word in page.text]
        assert not shown, f"the stack trace's {shown} reached the page"
        assert 'data-testid="support-code"' in page.text


# -- errors in every style ---------------------------------------------------------------------


@pytest.mark.parametrize("style", STYLES)
def test_no_error_page_shows_upstream_internals(staff, alt, style):
    alt.set(error_style=style)
    pages = {}
    alt.set(list_status=500)
    pages["list 500"] = get(staff, "/flows")
    alt.set(list_status=None, max_limit=5)
    pages["list 400"] = get(staff, "/flows")
    alt.set(max_limit=None)
    pages["detail 404"] = get(staff, f"/flows/{uuid.uuid4()}")
    for mode in ("conflict", "invalid", "not_found"):
        alt.set(create=mode)
        pages[f"create {mode}"] = create_form(staff)
    broken = {name: (page.status_code, internals(page)) for name, page in pages.items() if internals(page)}
    assert not broken, broken
    failed = {name: page.status_code for name, page in pages.items() if page.status_code == 500}
    assert not failed, failed


def test_list_endpoint_missing_is_a_configuration_problem(staff, alt):
    """A 404 on the list, in every error style, is the portal pointed at the wrong address."""
    wrong = {}
    for style in STYLES:
        alt.set(list_status=404, error_style=style)
        page = get(staff, "/flows")
        sound = page.status_code != 500 and not internals(page)
        if not sound or "FLOW_API_URL" not in page.text or "Flow not found" in page.text:
            wrong[style] = page.status_code
    assert not wrong, f"not shown as a configuration problem (check FLOW_API_URL) in styles {wrong}"


# -- the detail page ---------------------------------------------------------------------------


def shown_times(page) -> list[datetime]:
    moments = []
    for raw in TIME.findall(page.text):
        moment = datetime.fromisoformat(unescape(raw))
        moments.append(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    return moments


@pytest.mark.parametrize("detail", ["spec", "quirky", "offset_times"])
def test_detail_reads_every_shape_of_the_retrieve_answer(staff, alt, detail):
    alt.set(detail=detail)
    flow = alt.by_number(42)
    page = get(staff, f"/flows/{flow.id}")
    assert page.status_code == 200
    assert re.search(r">\s*42\s*<", page.text), "the flow number is not shown"
    for entry in flow.incidents:
        assert entry["message"] in page.text
    created = flow.created_at.replace(microsecond=0) if detail == "quirky" else flow.created_at
    times = shown_times(page)
    assert created in times, f"created {created} not among {times}"
    assert flow.updated_at in times, f"updated {flow.updated_at} not among {times}"


def consent_in_index(client, flow_id: str) -> str | None:
    with client.application.app_context():
        return db.session.scalar(select(FlowRecord.consent_status).where(FlowRecord.flow_id == flow_id))


def test_statuses_in_another_letter_case_are_read_as_the_statuses_they_are(staff, alt):
    """ACCEPTED and CANCELLED were kept as written: untranslated, uncoloured, out of every filter and count, and a
    cancelled flow was not taken for archived."""
    alt.set(items="upper_case", detail="upper_case")
    accepted = [flow for flow in alt.flows if flow.status == "Accepted" and not flow.archived]
    staff.post("/language", data={"language": "nb", "next": "/flows"})
    page = get(staff, "/flows?limit=100")
    assert "ACCEPTED" not in page.text and "Akseptert" in page.text
    wait_until(lambda: consent_in_index(staff, accepted[-1].id) == "Accepted", "the list's statuses indexed")
    found = get(staff, "/flows?archived=all&status=Accepted&limit=100")
    assert all(flow.id in found.text for flow in accepted)
    cancelled = next(flow for flow in alt.flows if flow.archived)
    assert 'data-lifecycle="cancelled" data-archived="yes"' in get(staff, f"/flows/{cancelled.id}").text

    def indexed():
        with staff.application.app_context():
            record = db.session.scalar(select(FlowRecord).where(FlowRecord.flow_id == cancelled.id))
            return record is not None and (record.lifecycle, record.archived) == ("cancelled", True)

    wait_until(indexed, "the cancelled flow indexed as cancelled and archived")


@pytest.mark.parametrize("which", ["newest", "middle", "oldest", "archived"])
def test_a_refresh_reads_the_consent_status_from_the_flows_own_list_item(staff, alt, which):
    """The retrieve answer has no consent status; a refresh reads it from the list, beside a neighbour, in a few
    calls, also where a cursor outside its own list is refused (this service: 400)."""
    current = [flow for flow in alt.flows if not flow.archived]
    flow = {"newest": current[0], "middle": current[10], "oldest": current[-1]}.get(which)
    flow = flow or next(flow for flow in alt.flows if flow.archived)
    flow.status = "Accepted" if flow.status != "Accepted" else "Rejected"
    lists = alt.counts["list"]
    answer = staff.post(f"/flows/{flow.id}/refresh")
    assert answer.status_code == 302
    assert consent_in_index(staff, flow.id) == flow.status
    assert "did not show this flow" not in get(staff, answer.headers["Location"]).text
    assert alt.counts["list"] - lists <= 6, "never a walk through the list"


@pytest.mark.parametrize("switch", [{"paging": "ignore_cursor"}, {"paging": "offset"}, {"list_status": 500}])
def test_a_refresh_whose_list_cannot_show_the_flow_says_so(staff, alt, switch):
    flow = alt.by_number(42)
    alt.set(**switch)
    lists = alt.counts["list"]
    answer = staff.post(f"/flows/{flow.id}/refresh")
    assert answer.status_code == 302
    assert alt.counts["list"] - lists <= 6, "never a walk through the list"
    lists = alt.counts["list"]
    page = get(staff, answer.headers["Location"])
    assert "refreshed from the Flow Service" in page.text
    assert "did not show this flow: its consent status is what the portal last knew" in page.text
    assert alt.counts["list"] - lists <= 6, "the page's own look for the answer: no walk either"


def test_a_refresh_stops_asking_a_slow_list_for_the_flow_past_its_time(staff, alt):
    """Up to six list calls in a row, each as slow as the list: a flow's page took 21 s (a stand-in). The clock the
    portal reads moves a second at each look here, so the look-up's few seconds pass after a call or two."""
    flow = alt.by_number(42)
    alt.set(paging="ignore_cursor")  # the list never shows the flow: every call a look-up may make
    moments = itertools.count(time.time(), 1.0)
    staff.application.extensions["portal.clock"] = lambda: next(moments)
    lists = alt.counts["list"]
    answer = staff.post(f"/flows/{flow.id}/refresh")
    assert answer.status_code == 302
    assert alt.counts["list"] - lists < 4, "no call once the look-up's time had passed (4 without a limit)"


# -- creating a flow ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mode", ["design", "location_only", "accepted_links", "text_created", "see_other", "found", "enveloped"]
)
def test_created_flow_is_shown_whatever_the_answer_names_it_by(staff, alt, mode):
    alt.set(create=mode)
    answer = create_form(staff)
    assert "may have been created" not in answer.text
    assert answer.status_code == 302, answer.status_code
    assert answer.headers["Location"] == f"/flows/{alt.flows[0].id}"
    page = get(staff, answer.headers["Location"])
    assert page.status_code == 200
    assert "may have been created" not in page.text


def test_a_create_answered_with_a_redirect_to_its_own_path_is_no_flow_made(staff, alt):
    """A 302 to a flow's address is the flow made (above); one to the create's own path at another address (the
    service moved to https://) names no flow: an answer that did not confirm it, never a flow created."""
    alt.set(create="found_elsewhere")
    flows = len(alt.flows)
    answer = create_form(staff)
    page = get(staff, answer.headers["Location"]) if answer.status_code in REDIRECTS else answer
    assert "The Flow Service did not confirm the flow." in page.text
    assert "was created" not in page.text and len(alt.flows) == flows


def test_a_flow_accepted_without_its_id_is_looked_for_in_the_list_and_never_sent_twice(staff, alt):
    alt.set(create="no_id")
    data = form_data(staff)
    answer = staff.post("/flows/new", data=data)
    assert (answer.status_code, answer.headers["Location"]) == (302, "/flows")
    created = alt.flows[0]
    said = f"The Flow Service accepted the flow {created.reference_id} but did not say its id: find it in the flow list"
    page = get(staff, "/flows")
    assert said in page.text
    assert created.id in page.text, "the list it leads to shows the new flow"
    again = staff.post("/flows/new", data=data)
    assert_sound(get(staff, again.headers["Location"]) if again.status_code in REDIRECTS else again)
    assert alt.counts["create"] == 1, "the form sent again (a reload, a double click) creates nothing more"


def test_a_flow_created_under_an_id_no_address_holds_says_the_id(staff, alt):
    """An id such as "flows/42 of alt-org" read as no id at all: "did not say its id or reference" of a service that
    said one (found by a stand-in service). The id is quoted; the list is where to find the flow."""
    alt.set(create="unusable_id")
    answer = create_form(staff)
    assert (answer.status_code, answer.headers["Location"]) == (302, "/flows")
    page = get(staff, "/flows")
    created = alt.flows[0]
    said = f"named it by an id the portal cannot open (flows/{created.number} of alt-org): find it in the flow list"
    assert said in page.text and "did not say its id" not in page.text


@pytest.mark.parametrize(("mode", "named"), [("operation_location", "op-77"), ("task_id", "task-55")])
def test_an_accepted_create_that_names_a_job_is_no_flow_of_that_name(staff, alt, mode, named):
    """A 202 whose Location or `id` named the job to poll was taken for the flow: "Flow op-77 was created", a page
    of a flow not found, and an index row for a flow that does not exist (found by a stand-in service). The flow is
    looked for in the list instead, as for any answer that does not name it."""
    alt.set(create=mode)
    answer = staff.post("/flows/new", data=form_data(staff))
    assert (answer.status_code, answer.headers["Location"]) == (302, "/flows")
    created = alt.flows[0]
    page = get(staff, "/flows")
    assert "The Flow Service accepted the flow but did not say its id or reference" in page.text
    assert created.id in page.text and named not in page.text
    with staff.application.app_context():
        assert db.session.scalar(select(FlowRecord).where(FlowRecord.flow_id == named)) is None
        assert not db.session.scalars(select(AuditEntry).where(AuditEntry.target.contains(named))).all()


def test_a_page_shorter_than_asked_with_no_word_of_more_says_so(staff, alt):
    """A service that caps its pages at 8 and leaves out has_more showed 8 flows, no Next and no word: the other 15
    could not be reached, and nothing said so (found by a stand-in service). Its last page and a capped one look
    alike, so the page says it cannot tell."""
    alt.set(page_cap=8, has_more="missing")
    page = get(staff, "/flows")
    assert "sent fewer than asked for: most likely this is the last page" in page.text


def test_a_has_more_of_yes_or_no_is_read_and_one_of_neither_is_quoted(staff, alt):
    """`has_more: "yes"` read as silence: "did not say whether more flows follow" of a service that said so (found by
    a stand-in service). Yes and no are read; what is neither is quoted, not called unsaid."""
    alt.set(has_more="words")
    seen = walk(staff, "/flows", walk_cap(alt))
    assert not seen["problems"], seen["problems"]
    assert exactly_once(seen["ids"], [flow.id for flow in alt.flows if not flow.archived]) is None
    assert "did not say whether more flows follow" not in get(staff, "/flows").text
    alt.set(has_more="odd")
    page = get(staff, "/flows")
    assert "sent &#34;maybe&#34; where it says whether more flows follow, which is neither yes nor no" in page.text
    assert "Next is offered because this page is full" in page.text and "did not say" not in page.text
    alt.set(has_more="odd", page_cap=8)
    page = get(staff, "/flows")
    assert "neither yes nor no, and fewer flows than asked for: most likely this is the last page" in page.text


def test_a_status_that_is_no_text_is_said_on_the_list(staff, alt):
    """A list item's status of another type (["Opened"], 3) showed as an unknown status without a word (found by a
    stand-in service): the list says how many and quotes one."""
    alt.set(items="typed_status")
    page = get(staff, "/flows")
    assert_sound(page)
    odd = [flow for flow in alt.flows if not flow.archived][:10]
    count = sum(1 for flow in odd if flow.number % 2)
    assert f"The Flow Service sent {count} flows&#39; statuses in a form the portal cannot read (" in page.text
    alt.set(items="full")
    assert "cannot read" not in get(staff, "/flows").text


def test_a_reference_or_national_id_that_is_no_text_is_said_on_the_list(staff, alt):
    """A list item's reference of 10040.5 or national id of {} showed as "—" without a word (found by a stand-in
    service): the list counts them."""
    alt.set(items="typed_names")
    page = get(staff, "/flows")
    assert_sound(page)
    count = sum(1 for flow in [flow for flow in alt.flows if not flow.archived][:10] if flow.number % 2)
    said = f"The Flow Service sent {count} flows&#39; references or national ids in a form the portal cannot read"
    assert said in page.text and "kept-out" not in page.text


def test_a_flow_s_fields_of_another_type_are_named_on_its_page(staff, alt):
    """A flow's status of 3, a version of "three", a sandboxConfig of "none", a number among its actions and
    incidents that are no records showed as "—", not at all or as incidents without a message, as if the service
    had not sent them (found by stand-in services): the page names them."""
    alt.set(detail="mistyped")
    flow = next(flow for flow in alt.flows if not flow.archived)
    page = get(staff, f"/flows/{flow.id}")
    assert_sound(page)
    said = re.search(r'data-testid="fields-unread">([^<]*)<', page.text)
    assert said and "the fields status, version, sandboxConfig, actions, and incidents in a form the" in said[1], said
    alt.set(detail="spec")
    assert 'data-testid="fields-unread"' not in get(staff, f"/flows/{flow.id}").text


def test_pages_a_service_keeps_smaller_than_its_total_are_all_reached(staff, alt):
    alt.set(page_cap=8, has_more="missing", paging="offset")
    seen = walk(staff, "/flows", walk_cap(alt))
    assert not seen["problems"], seen["problems"]
    assert exactly_once(seen["ids"], [flow.id for flow in alt.flows if not flow.archived]) is None


def test_an_offset_total_lower_than_the_flows_ends_the_list_without_going_round(staff, alt):
    """Past a `total` that said fewer flows than there were, the portal went on by ids, which an offset service
    ignores: pages 1, 2, 1, 2… (found by a stand-in service). Its total is its word that no more follow."""
    alt.set(paging="offset", has_more="missing", understated_total=5)
    seen = walk(staff, "/flows", walk_cap(alt))
    assert not seen["problems"], seen["problems"]
    assert seen["pages"] == 2 and len(seen["ids"]) == len(set(seen["ids"])) == 20


def test_an_empty_page_that_says_more_follow_says_so(staff, alt):
    alt.set(paging="empty_endless")
    page = get(staff, "/flows")
    assert_sound(page)
    assert "The Flow Service sent no flows on this page, yet says more follow: Next asks for them." in page.text
    assert "No flows yet" not in page.text, "not beside its Next (a stand-in: the page contradicted itself)"


@pytest.mark.parametrize(
    ("create", "reason"),
    [
        ("ok_with_error", LAST_NAME_REASON),
        ("success_false", BLOCKED_REASON),
        ("jsend_error", BLOCKED_REASON),
        ("jsend_fail", LAST_NAME_REASON),
    ],
)
def test_a_refusal_answered_http_200_is_a_refusal(staff, alt, create, reason):
    """An error body under HTTP 200 was taken for a flow created without an id: "accepted, find it in the list",
    an audit entry for a flow that does not exist, and the corrected form refused as sent already (found by a
    stand-in service)."""
    alt.set(create=create)
    data = form_data(staff)
    page = staff.post("/flows/new", data=data)
    assert reason in page.text and 'name="last_name"' in page.text, "the reason, with the form to correct"
    assert "accepted the flow" not in page.text
    alt.set(create="design")
    again = staff.post("/flows/new", data=data)
    assert again.status_code == 302 and alt.counts["create"] == 2, "sent again, and created"


@pytest.mark.parametrize("create", ["dropped", "bad_gzip"])
def test_a_create_whose_answer_broke_on_the_way_may_have_created_the_flow(staff, alt, create):
    """The service created the flow, then its connection closed (or its answer could not be decoded): the portal
    said "not created, send the form again" (the request could not be sent, it thought), and a resend made the
    person a second flow (found by a stand-in service)."""
    alt.set(create=create)
    data = form_data(staff)
    first = staff.post("/flows/new", data=data)
    assert "may have been created" in first.text and "You can send the form again" not in first.text
    # Not "check the flow list", which cannot show a flow while the service is away: the form sent again does it.
    assert "the portal then looks for the flow in the service&#39;s list first" in first.text
    alt.set(create="design")
    again = staff.post("/flows/new", data=data)
    assert_sound(get(staff, again.headers["Location"]) if again.status_code in REDIRECTS else again)
    assert alt.counts["create"] == 1, "the form sent again looks for the flow instead of creating a second"


@pytest.mark.parametrize("items", ["masked", "date_only"])
def test_an_unconfirmed_create_is_not_sent_again_when_the_list_cannot_say_whose_flow_came_since(staff, alt, items):
    """A list that masks national ids, or dates flows without a time, cannot rule out that the lost create made
    this person's flow: the form is kept, not sent a second time."""
    alt.set(create="lost_answer", items=items)
    data = form_data(staff)
    first = staff.post("/flows/new", data=data)
    assert first.status_code == 504 and "may have been created" in first.text
    staff.application.extensions["portal.clock"] = lambda: time.time() + 180  # past the wait for a slow service
    alt.set(create="design")
    again = staff.post("/flows/new", data=data)
    assert again.status_code == 409 and "does not show whether it was created" in again.text
    assert alt.counts["create"] == 1


def test_an_unconfirmed_create_is_not_sent_again_past_a_list_end_the_service_contradicts(staff, alt):
    """A resend looks through the newest flows for the one the lost create may have made. Fifty flows of others
    created since filled that page, and the service said "no more" beside a next link: taken for the list's end, the
    form was sent again and the person had two flows (found by a stand-in service). A contradicted end is no end."""
    alt.set(create="lost_answer")
    data = form_data(staff)
    assert staff.post("/flows/new", data=data).status_code == 504
    made = alt.flows[0]
    people = national_ids()
    now = datetime.now(UTC)
    others = [
        replace(made, id=str(uuid.uuid4()), number=made.number + 1 + n, national_id=next(people), created_at=now)
        for n in range(50)
    ]
    alt.flows[:0] = [other for other in others if other.national_id != made.national_id]
    alt.set(create="design", paging="next_link", has_more="false")
    staff.application.extensions["portal.clock"] = lambda: time.time() + 180  # past the wait for a slow service
    again = staff.post("/flows/new", data=data)
    assert again.status_code == 409 and "does not show whether it was created" in again.text
    assert alt.counts["create"] == 1, "not sent a second time"


@pytest.mark.parametrize("style", STYLES)
def test_conflict_on_create_is_a_refusal_with_the_reason(staff, alt, style):
    alt.set(create="conflict", error_style=style)
    before = len(alt.flows)
    page = create_form(staff)
    assert page.status_code in (200, 409, 422), page.status_code
    assert_sound(page)
    assert "may have been created" not in page.text
    assert 'name="last_name"' in page.text, "the form is shown again"
    if style in READABLE_STYLES:
        assert CONFLICT_REASON in page.text
    assert len(alt.flows) == before


@pytest.mark.parametrize("style", READABLE_STYLES)
def test_field_error_on_create_is_shown(staff, alt, style):
    alt.set(create="invalid", error_style=style)
    page = create_form(staff)
    assert_sound(page)
    assert page.status_code in (200, 422), page.status_code
    assert LAST_NAME_REASON in page.text
    assert "may have been created" not in page.text


def test_create_endpoint_missing_is_a_configuration_problem(staff, alt):
    alt.set(create="not_found")
    page = create_form(staff)
    assert_sound(page)
    assert "FLOW_API_URL" in page.text
    assert "may have been created" not in page.text


def test_create_refused_at_the_token_step_is_not_created_and_can_be_sent_again(staff, alt):
    data = form_data(staff)
    alt.set(token="refuse")
    first = staff.post("/flows/new", data=data)
    assert_sound(first)
    assert "may have been created" not in first.text
    assert "not created" in first.text.lower()
    assert alt.counts["token"] >= 1 and alt.counts["create"] == 0
    again = staff.post("/flows/new", data=data)
    shown = get(staff, again.headers["Location"]) if again.status_code in REDIRECTS else again
    assert "was sent already" not in shown.text
    assert "not created" in shown.text.lower(), "sent again at once, it is tried again (and refused again)"


# -- the identity provider ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "words"),
    [("refuse", SECRET_REFUSAL), ("invalid_request", SCOPE_REFUSAL)],
    ids=["unauthorized_client", "invalid_request"],
)
def test_token_refusal_is_explained_in_the_providers_words(staff, alt, mode, words):
    alt.set(token=mode)
    page = get(staff, "/flows")
    assert_sound(page)
    assert page.status_code >= 400
    assert words in page.text, "the provider's error_description is lost"
    assert f"The identity provider says: {words}" in page.text
    assert alt.counts["list"] == 0
    if mode == "invalid_request":
        assert "401 from the API" not in page.text
        assert "refused the portal's token request" in page.text and "FLOW_TOKEN_URL" in page.text


def test_an_identity_provider_that_asks_to_slow_down_is_named_as_such(staff, alt):
    """Its 429 read "The Flow Service asks us to slow down", where its 503 names the identity provider (a stand-in)."""
    alt.set(token="slow_down")
    detail = get(staff, f"/flows/{alt.by_number(42).id}")
    assert detail.status_code == 503 and "identity provider asks us to slow down" in detail.text
    assert "The Flow Service asks us" not in detail.text


def test_unavailable_identity_provider_is_retried_then_explained(staff, alt):
    alt.set(token="unavailable")
    answer = staff.get("/flows")
    assert answer.status_code == 302 and answer.headers["Location"] == "/flows?archived=all", "the index instead"
    page = get(staff, answer.headers["Location"])
    assert page.status_code == 200 and "so these flows come from the portal" in page.text
    assert "The Flow Service&#39;s identity provider is unavailable, so these flows" in page.text, "not the service"
    assert_sound(page)
    assert alt.counts["token"] >= 2, "a 503 from the identity provider is tried again"
    assert alt.counts["list"] == 0
    detail = get(staff, f"/flows/{alt.by_number(42).id}")
    assert detail.status_code in (502, 503, 504) and "Search the portal" in detail.text
    assert "identity provider is unavailable" in detail.text


def test_token_lifetime_in_words_is_diagnosed_truthfully(staff, alt, caplog):
    """`expires_in: "5m"`: used with a safe lifetime, or refused naming expires_in (on the page or in the log)."""
    alt.set(expires_in="5m")
    page = get(staff, "/flows")
    assert_sound(page)
    assert "not a JSON object" not in page.text + caplog.text
    if page.status_code >= 400:
        assert "expires_in" in page.text + caplog.text
    else:
        assert FLOW_ROW.findall(page.text) == alt.current_ids()[:10]


def test_a_reference_the_index_does_not_know_yet_is_not_said_to_be_missing_at_the_service(staff, alt):
    """/flows/AL-42 for a flow made elsewhere since the list was last read said "The Flow Service has no flow with
    this id": it has, under its UUID (found by a new user). The page says what is known, and the way to it."""
    flow = alt.by_number(42)
    page = staff.get(f"/flows/{flow.reference_id}")
    assert page.status_code == 404 and "No flow found by this reference yet" in page.text
    assert "has no flow with this id for your organization" not in page.text
    get(staff, "/flows?limit=50")  # the list read: the index knows the reference (written by its own thread)
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    found = staff.get(f"/flows/{flow.reference_id}")
    assert found.status_code == 302 and found.headers["Location"] == f"/flows/{flow.id}"


def test_a_reference_shaped_flow_id_the_index_has_heard_of_gets_the_heard_of_page(staff, alt):
    """A flow id of a reference's shape ("LOAN-13") that the service no longer answers for, but the index knows,
    got the "not indexed yet" page and lost the links to what the portal last heard (found by a re-check)."""
    flow = alt.flows[0]
    flow.id = "LOAN-13"
    get(staff, "/flows")
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    alt.flows.remove(flow)
    page = staff.get("/flows/LOAN-13")
    assert page.status_code == 404 and "No flow found by this reference yet" not in page.text
    assert 'data-testid="heard-of"' in page.text


def test_a_change_is_looked_up_in_the_list_once_even_when_the_service_s_clock_runs_ahead(staff, alt):
    """The list's word is stamped with the portal's time: a service whose `updatedAt` runs two minutes ahead had
    every view of the flow's page read the list again (two calls each; found by a re-check)."""
    flow = alt.flows[0]
    get(staff, "/flows")
    wait_until(lambda: consent_in_index(staff, flow.id) is not None, "the list indexed")
    flow.updated_at = datetime.now(UTC) + timedelta(minutes=2)
    lists = alt.counts["list"]
    for _ in range(4):
        assert get(staff, f"/flows/{flow.id}").status_code == 200
    assert alt.counts["list"] - lists <= 2, "one look for the change, not one a view"


def test_a_next_link_beside_has_more_false_is_followed_and_said(staff, alt):
    """`has_more: false` beside a `next` link to more flows: the list stopped at its first page without a word, the
    other 13 flows out of reach (found by a stand-in service). The service's link is its word too: Next follows it,
    and the page says the two disagree."""
    alt.set(paging="next_link", has_more="false")
    seen = walk(staff, "/flows", walk_cap(alt))
    assert not seen["problems"], seen["problems"]
    assert exactly_once(seen["ids"], alt.current_ids()) is None
    said = "The Flow Service says no more flows follow, yet names a next page: Next asks for it."
    assert said in get(staff, "/flows").text
    alt.set(paging="next_link", has_more="bool")
    assert said not in get(staff, "/flows").text


def test_a_reference_written_with_unseen_characters_names_them(staff, alt):
    """A reference whose number sits in a right-to-left override ("AL-\\u202e56\\u202c") read "AL-65" in the list,
    in the flow's heading and in its title: another flow's reference, unsaid (found by a stand-in service). The
    characters a reader cannot see are named, as elsewhere on the pages."""
    alt.set(items="overridden_reference", detail="overridden_reference")
    flow = alt.by_number(56)
    for page in (get(staff, "/flows"), get(staff, f"/flows/{flow.id}")):
        assert_sound(page)
        assert "\u202e" not in page.text
        assert "AL-[U+202E]56[U+202C]" in page.text
