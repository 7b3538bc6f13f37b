"""A page left open hears of the webhook events that arrive after it was loaded: a flow's page of the flow's, the
events list's first page of those its filters match. The page says up to which row it showed; `/flows/<id>/heard`
and `/events/heard` answer how many came since (page-news.js asks them; portal/news.py)."""

import html
import re
import uuid
from datetime import datetime, timezone

import pytest
from support import deliver_signed, signed_in_as


def watch_address(page: str) -> str:
    found = re.search(r'class="page-news" data-watch="([^"]+)"', page)
    assert found, "the page carries no address to ask for news"
    return html.unescape(found[1])


def event_for(flow_id: str, event_type: str = "flow.status_changed", **data) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "type": event_type,
        "timestamp": datetime.now(timezone.utc).isoformat(),
        "data": {"flowId": flow_id, "status": "Opened"} | data,
    }


@pytest.fixture
def flow_id(sandbox):
    return sandbox.create()["flowId"]


def test_an_open_page_hears_of_each_event_that_arrived_after_it_was_loaded(app, signed_in, flow_id):
    staff = signed_in("viewer")
    assert deliver_signed(app, event_for(flow_id, "flow.created")).status_code == 200  # shown on the page
    watch = watch_address(staff.get(f"/flows/{flow_id}").text)
    assert staff.get(watch).get_json() == {"new": 0, "message": None}

    assert deliver_signed(app, event_for(str(uuid.uuid4()))).status_code == 200  # another flow's: no news
    assert deliver_signed(app, event_for(flow_id)).status_code == 200
    heard = staff.get(watch)
    assert heard.status_code == 200 and heard.headers["Content-Type"] == "application/json"
    assert heard.get_json() == {
        "new": 1,
        "message": "A webhook event arrived for this flow after this page was loaded (flow.status_changed). The "
        "newest says the consent status is Opened. Reload the page to see it.",
    }
    assert deliver_signed(app, event_for(flow_id, status="Accepted")).status_code == 200
    completed = event_for(flow_id, "flow.completed")
    del completed["data"]["status"]  # says no consent status: the newest that says one is told
    assert deliver_signed(app, completed).status_code == 200
    assert staff.get(watch).get_json()["message"] == (
        "3 webhook events arrived for this flow after this page was loaded (flow.status_changed, flow.completed). "
        "The newest says the consent status is Accepted. Reload the page to see them."
    )
    assert watch_address(staff.get(f"/flows/{flow_id}").text) != watch, "a page loaded again shows up to the last"
    assert staff.get(watch_address(staff.get(f"/flows/{flow_id}").text)).get_json()["new"] == 0


def test_the_news_names_a_few_types_and_masks_what_a_type_holds(app, signed_in, flow_id):
    staff = signed_in("viewer")
    watch = watch_address(staff.get(f"/flows/{flow_id}").text)
    for n in range(7):
        assert deliver_signed(app, event_for(flow_id, f"custom.kind{n}")).status_code == 200
    assert "custom.kind4…)" in staff.get(watch).get_json()["message"], "five named, the rest left to the page"
    assert deliver_signed(app, event_for(flow_id, "seen.15108695088")).status_code == 200
    watch = watch_address(staff.get(f"/flows/{flow_id}").text)
    assert deliver_signed(app, event_for(flow_id, "seen.15108695088")).status_code == 200
    said = staff.get(watch).get_json()["message"]
    assert "15108695088" not in said and "seen.151086•••••" in said


def test_the_news_is_said_in_the_person_s_language(app, signed_in, flow_id):
    staff = signed_in("viewer")
    staff.post("/language", data={"language": "sv"})
    watch = watch_address(staff.get(f"/flows/{flow_id}").text)
    assert deliver_signed(app, event_for(flow_id)).status_code == 200
    said = staff.get(watch).get_json()["message"]
    assert said.startswith("En webhook-händelse") and "arrived" not in said


@pytest.mark.parametrize("after", ["", "x", "-1", "1.0", "1" * 19, "１", " 1"])
def test_a_row_that_is_no_row_is_refused_as_json(signed_in, flow_id, after):
    staff = signed_in("viewer")
    for path in (f"/flows/{flow_id}/heard", "/events/heard"):
        answer = staff.get(path, query_string={"after": after})
        assert answer.status_code == 400 and answer.get_json()["error"] == "bad_request", path


def test_a_flow_id_that_is_none_is_not_found(signed_in):
    assert signed_in("viewer").get("/flows/not%20an%20id/heard?after=0").status_code == 404


def test_signed_out_the_question_gets_401_in_json_not_the_sign_in_page(client, flow_id):
    for path in (f"/flows/{flow_id}/heard?after=0", "/events/heard?after=0"):
        answer = client.get(path)
        assert answer.status_code == 401 and answer.get_json() == {
            "error": "signed_out",
            "message": "You were signed out. Sign in again to go on.",
        }, path
    assert "Please sign in" not in client.get("/login").text, "no message left for a page the person did not ask for"


# -- the events list ------------------------------------------------------------------------------


def test_the_events_list_hears_of_events_its_filters_match(app, signed_in, flow_id):
    staff = signed_in("viewer")
    assert deliver_signed(app, event_for(flow_id, "flow.created")).status_code == 200
    every, of_type = (watch_address(staff.get(path).text) for path in ("/events", "/events?type=flow.completed"))
    assert staff.get(every).get_json() == {"new": 0, "message": None}, "the newest row shown is the newest there is"
    assert deliver_signed(app, event_for(flow_id, "flow.status_changed")).status_code == 200
    assert deliver_signed(app, event_for(flow_id, "flow.completed")).status_code == 200
    assert staff.get(every).get_json() == {
        "new": 2,
        "message": "2 webhook events arrived after this page was loaded (flow.status_changed, flow.completed). "
        "Reload the page to see them.",  # the list's events are of several flows: no status told
    }
    assert staff.get(of_type).get_json()["new"] == 1, "only what the list's filters match"
    by_flow = watch_address(staff.get("/events", query_string={"flow": str(uuid.uuid4())}).text)
    assert staff.get(by_flow).get_json()["new"] == 0


def test_an_older_page_of_events_asks_nothing(app, signed_in, flow_id):
    staff = signed_in("viewer")
    for _ in range(2):
        assert deliver_signed(app, event_for(flow_id)).status_code == 200
    first = staff.get("/events").text
    newest = int(re.search(r"/events/(\d+)", first)[1])
    older = staff.get(f"/events?before={newest}").text
    assert "data-watch" not in older


def test_the_flow_list_left_open_hears_of_every_event_and_a_later_page_asks_nothing(app, signed_in, sandbox):
    """Staff keep the flow list open all morning: its first page says when webhook events arrive (a status changed),
    from the row stored before the list was read; a page further on is history."""
    staff = signed_in("viewer")
    flows = [sandbox.create()["flowId"] for _ in range(11)]  # more than a page of 10
    assert deliver_signed(app, event_for(flows[0], "flow.created")).status_code == 200  # before: no news
    first = staff.get("/flows").text
    watch = watch_address(first)
    assert watch.startswith("/events/heard?after=") and staff.get(watch).get_json()["new"] == 0
    assert deliver_signed(app, event_for(flows[1], status="Accepted")).status_code == 200
    assert staff.get(watch).get_json()["message"] == (  # of any flow, on this page or not (a re-check)
        "A webhook event arrived after this list was loaded (flow.status_changed): a flow's status may have "
        "changed. Reload the page to see the list as it is now."
    )
    later = re.search(r'href="(/flows\?[^"]*after=[^"]*)"', first)
    assert later, "the first page links to the next"
    assert "data-watch" not in staff.get(html.unescape(later[1])).text


def test_a_filter_that_is_not_valid_is_refused_as_json(signed_in):
    answer = signed_in("viewer").get("/events/heard", query_string={"after": "0", "unlinked": "maybe"})
    assert answer.status_code == 400 and answer.get_json()["error"] == "bad_request"


@pytest.mark.parametrize("after", ["2147483647", "2147483648", "999999999999999999"])
def test_a_row_past_the_largest_the_store_holds_is_refused_not_a_500(make_app, database_url, sandbox, after):
    """Row ids are 32-bit integers on PostgreSQL: a larger `after` made the query fail there, a 500 and a traceback
    (found by an attack)."""
    staff = signed_in_as(make_app(database=database_url, WTF_CSRF_ENABLED=False), role="viewer")
    for path in (f"/flows/{sandbox.create()['flowId']}/heard", "/events/heard"):
        answer = staff.get(path, query_string={"after": after})
        if int(after) < 2**31:
            assert answer.status_code == 200 and answer.get_json() == {"new": 0, "message": None}, path
        else:
            assert answer.status_code == 400 and answer.get_json()["error"] == "bad_request", path


def test_the_answers_are_never_stored_by_the_browser(signed_in, client, flow_id):
    """What a person's session was told, as its pages: no copy in the browser's cache (found by an attack)."""
    staff = signed_in("viewer")
    for answer in (
        staff.get(f"/flows/{flow_id}/heard?after=0"),
        staff.get("/events/heard?after=x"),
        client.get(f"/flows/{flow_id}/heard?after=0"),
    ):
        assert answer.mimetype == "application/json"
        assert answer.headers.get("Cache-Control") == "no-store", answer.status_code


def test_a_page_answering_a_form_with_errors_asks_for_no_news(signed_in, flow_id):
    """A re-check: the flow's page sent back with a reveal's errors (a POST answered 400) carried page news, whose
    Reload button would send the form again."""
    answer = signed_in("operator").post(f"/flows/{flow_id}/reveal", data={"purpose": ""})
    assert answer.status_code == 400 and "reveal-form" in answer.text
    assert "data-watch" not in answer.text
