"""Regression tests for inputs that once ended in a 500."""

import gc
import uuid
from datetime import datetime, timezone

import pytest
from support import closing_answers, deliver_signed


@pytest.mark.parametrize(
    "timestamp", ["9999-12-31T23:59:59Z", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+01:00"]
)
def test_an_event_at_the_ends_of_the_calendar_breaks_no_page(app, sandbox, signed_in, timestamp):
    flow = sandbox.create()
    event = {
        "id": str(uuid.uuid4()),
        "type": "flow.status_changed",
        "timestamp": timestamp,
        "data": {"flowId": flow["flowId"], "referenceId": flow["referenceId"], "status": "Opened"},
    }
    assert deliver_signed(app, event).status_code == 200
    staff = signed_in("operator")
    page = staff.get(f"/flows/{flow['flowId']}")
    assert page.status_code == 200 and "flow.status_changed" in page.text
    assert staff.post(f"/flows/{flow['flowId']}/reveal", data={"purpose": "Identity check"}).status_code == 302
    events = staff.get(f"/events?flow={flow['flowId']}")
    assert events.status_code == 200
    row = events.text.split('href="/events/')[1].split('"')[0]
    assert staff.get(f"/events/{row}").status_code == 200


# -- found by a new user's walk through the flow index (2026-11-23) ----------------------------


def index_flows(app, *observations):
    from portal.flowindex.store import apply_observations

    with app.app_context():
        apply_observations(observations, app.extensions["portal.settings"].index_key)


def listed(flow_id: str, reference: str):
    from portal.flowindex.observations import LIST, Observation

    now = datetime.now(timezone.utc)
    return Observation(flow_id, LIST, now, now, reference_id=reference, consent_status="Opened", archived=False)


@pytest.mark.parametrize(
    "address",
    ["/flows?from=0001-01-01", "/flows?to=9999-12-31", "/flows/export.csv?to=9999-12-31", "/flows?born=0001-01-01"],
)
def test_dates_at_the_ends_of_the_calendar_are_named_not_a_500(signed_in, address):
    staff = signed_in("viewer")
    answer = staff.get(address)
    assert answer.status_code in (200, 302), answer.status_code
    shown = staff.get(answer.headers["Location"]) if answer.status_code == 302 else answer
    assert shown.status_code == 200 and "Use a date between the years 1800 and 2999." in shown.text


def test_a_reference_two_flows_share_lists_both_instead_of_a_404(app, signed_in):
    index_flows(app, listed("flow-a", "LA-77"), listed("flow-b", "LA-77"))
    staff = signed_in("viewer")
    answer = staff.get("/flows/la-77")
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/flows?q=la-77")
    page = staff.get(answer.headers["Location"])
    assert 'data-flow-id="flow-a"' in page.text and 'data-flow-id="flow-b"' in page.text


def test_a_reference_with_spaces_around_it_opens_its_flow(app, signed_in):
    index_flows(app, listed("flow-c", "LA-78"))
    answer = signed_in("viewer").get("/flows/%20LA-78%20")
    assert answer.status_code == 302 and answer.headers["Location"].endswith("/flows/flow-c")


def test_an_events_export_with_a_bad_filter_exports_nothing(signed_in):
    staff = signed_in("viewer")
    answer = staff.get("/events/export.csv?type=%00&flow=LA-1")
    assert (
        answer.status_code == 302
        and "/events?" in answer.headers["Location"]
        and "flow=LA-1" in answer.headers["Location"]
    )
    page = staff.get(answer.headers["Location"])
    assert "The event type was left out: it was not one the list can show." in page.text


def test_unlinked_0_means_every_event(signed_in):
    page = signed_in("viewer").get("/events?unlinked=0", follow_redirects=True)  # the default: out of the address
    assert page.status_code == 200 and "was not valid" not in page.text and page.request.path == "/events"
    assert not page.request.query_string


def test_an_answer_left_half_sent_by_the_test_server_is_still_closed():
    """The browser tests' server (werkzeug) skips close() when a client drops the connection mid-answer."""
    closed = []

    class Answer:
        def __iter__(self):
            yield b"first"
            yield b"second"

        def close(self):
            closed.append(True)

    answered = closing_answers(lambda environ, start_response: Answer())({}, lambda *args: None)
    assert next(answered) == b"first"
    del answered  # what werkzeug leaves behind when its write fails: the iterator, unclosed
    gc.collect()
    assert closed == [True]
