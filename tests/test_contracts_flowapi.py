"""Contracts of portal/flowapi that mutation testing found unguarded: how each answer of the service is read.

The service is a small stand-in served over real HTTP (it answers what a test sets, which the sandbox cannot);
tokens come from the sandbox's identity provider.
"""

import json
import logging
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from altservice import LAST_NAME_REASON
from altservice import PORTAL_SETTINGS as ALT_SETTINGS
from flask import Flask, Response
from stdnum import luhn
from support import Clock, jwt_settings, portal_config, production_settings

from portal.flowapi import (
    Conflict,
    EndpointNotFound,
    FieldError,
    FlowApiError,
    InsufficientScope,
    NotFound,
    RateLimited,
    SandboxInProduction,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    ValidationFailed,
    build_client,
)
from portal.flowapi.client import Clock as ClientClock
from portal.flowapi.errors import outcome_kind
from portal.flowapi.retrying import backoff_seconds, retry_after_seconds
from portal.flowapi.text import redact
from portal.masking import mask_document
from portal.settings import load_settings

NATIONAL_ID = "15108695088"


class Upstream:
    """A Flow API that answers every call with `status`, `body` and `content_type`, and counts the calls."""

    def __init__(self, serve):
        self.status, self.body, self.content_type, self.calls = 200, "{}", "application/json", 0
        self.headers: dict[str, str] = {}
        app = Flask("upstream")

        @app.route("/api/<path:path>", methods=["GET", "POST"])
        def answer(path):
            self.calls += 1
            response = Response(self.body, self.status, content_type=self.content_type)
            if self.content_type is None:
                del response.headers["Content-Type"]
            response.headers.update(self.headers)
            return response

        self.url = serve(app)

    def answers(self, status: int, body: str, content_type: str | None = "application/json", **headers: str) -> None:
        self.status, self.body, self.content_type, self.headers = status, body, content_type, headers


@pytest.fixture
def upstream(serve) -> Upstream:
    return Upstream(serve)


@pytest.fixture
def client(sandbox, upstream):
    """The portal's client: the API is the stand-in, the token endpoint the sandbox's."""
    config = portal_config(sandbox.url, "sqlite://", FLOW_API_URL=upstream.url, FLOW_RETRY_BUDGET="1")
    return build_client(load_settings(config, testing=True))


def create(client):
    return client.create_flow(NATIONAL_ID, "Nordmann", "https://lender.example/done")


DESIGN_ERROR = '{"error": "some_code", "message": "Refused by the stand-in"}'


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, ValidationFailed),
        (413, ValidationFailed),
        (422, ValidationFailed),
        (409, Conflict),
        (401, Unauthorized),
        (403, InsufficientScope),
        (404, EndpointNotFound),  # the create endpoint must exist: a 404 is a wrong address
        (410, EndpointNotFound),
        (429, RateLimited),
        (408, UpstreamTimeout),
        (504, UpstreamTimeout),
        (500, UpstreamUnavailable),
        (503, UpstreamUnavailable),
        (418, UpstreamProtocolError),
    ],
)
def test_each_refusal_of_a_create_is_its_own_error(client, upstream, status, expected):
    upstream.answers(status, DESIGN_ERROR)
    with pytest.raises(Exception) as raised:
        create(client)
    error = raised.value
    assert type(error) is expected
    assert (error.status, error.code) == (status, "some_code")
    if expected is not EndpointNotFound:  # that one says what is wrong with the address instead
        assert error.reason == "Refused by the stand-in"
    if expected not in (EndpointNotFound, UpstreamProtocolError):  # those two say what went wrong themselves
        assert str(error) == "Refused by the stand-in", "the service's own words, not a placeholder"
    assert upstream.calls == (2 if status == 401 else 1), "a POST is never repeated, except once with a new token"


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_never_followed_with_the_token(client, upstream, status):
    upstream.answers(status, "", Location=upstream.url + "/api/somewhere-else")
    with pytest.raises(UpstreamProtocolError):
        create(client)
    with pytest.raises(UpstreamProtocolError) as raised:
        client.list_flows()
    assert upstream.calls == 2, "one call each: the bearer token never went to the other address"
    said = str(raised.value)  # where it pointed, by origin only (a stand-in: only "Unexpected answer HTTP 301")
    assert f"redirect (HTTP {status} to {upstream.url.rstrip('/')})" in said and "FLOW_API_URL" in said, said


def test_a_missing_flow_list_names_the_endpoint(client, upstream):
    upstream.answers(404, DESIGN_ERROR)
    with pytest.raises(EndpointNotFound) as raised:
        client.list_flows()
    assert str(raised.value) == "The Flow Service answered 404 for its flow list"


def test_an_error_answer_without_a_content_type_is_an_error_of_its_status(client, upstream):
    upstream.answers(503, "Service Unavailable", content_type=None)
    with pytest.raises(UpstreamUnavailable) as raised:
        client.list_flows()
    assert raised.value.status == 503


@pytest.mark.parametrize("status", [404, 410])
def test_a_flow_that_is_not_there_is_not_found(client, upstream, status):
    upstream.answers(status, DESIGN_ERROR)
    with pytest.raises(NotFound) as raised:
        client.get_flow("00000000-0000-4000-8000-000000000000")
    assert type(raised.value) is NotFound and raised.value.status == status


def test_a_422_on_create_is_a_validation_failure_with_the_field_named(sandbox, alt):
    """The alternative service refuses the last name with 422 (the sandbox answers 400)."""
    alt.set(create="invalid")
    config = portal_config(alt.url, "sqlite://", **ALT_SETTINGS)
    client = build_client(load_settings(config, testing=True))
    with pytest.raises(ValidationFailed) as raised:
        create(client)
    assert raised.value.status == 422 and raised.value.code == "validation_error"
    assert list(raised.value.details) == [FieldError("lastName", LAST_NAME_REASON)]


def test_national_ids_in_the_services_words_are_masked(client, upstream):
    body = {
        "error": "duplicate",
        "message": f"Person {NATIONAL_ID} has an open flow",
        "details": [{"field": "nationalId", "message": f"{NATIONAL_ID} is taken"}],
    }
    upstream.answers(422, json.dumps(body))
    with pytest.raises(ValidationFailed) as raised:
        create(client)
    [detail] = raised.value.details
    assert raised.value.reason.startswith("Person ") and raised.value.reason.endswith(" has an open flow")
    assert detail.field == "nationalId" and detail.message.endswith(" is taken")
    for text in (raised.value.reason, detail.message, str(raised.value)):
        assert NATIONAL_ID not in text


def test_a_national_id_in_plain_text_or_withheld_internals_is_masked(client, upstream, caplog):
    upstream.answers(503, f"No capacity for {NATIONAL_ID} right now", "text/plain")
    with pytest.raises(UpstreamUnavailable) as raised:
        create(client)
    assert raised.value.reason.startswith("No capacity for ") and NATIONAL_ID not in raised.value.reason
    upstream.answers(500, f"java.lang.IllegalStateException: person {NATIONAL_ID}", "text/plain")
    with caplog.at_level(logging.WARNING, logger="portal.flowapi"), pytest.raises(UpstreamUnavailable) as raised:
        create(client)
    assert raised.value.reason is None, "internals are not shown to staff"
    withheld = [record.getMessage() for record in caplog.records if "withheld" in record.getMessage()]
    assert withheld and withheld[0].startswith("flowapi: upstream text withheld from staff (request ")
    assert "IllegalStateException" in withheld[0]
    assert f"(request {raised.value.request_id})" in withheld[0], "the log line can be found from the support code"
    assert NATIONAL_ID not in caplog.text


def test_a_list_answered_with_an_empty_body_is_a_protocol_error(client, upstream):
    upstream.answers(200, "")
    with pytest.raises(UpstreamProtocolError) as raised:
        client.list_flows()
    assert (raised.value.status, raised.value.code) == (200, "malformed_json")
    assert str(raised.value) == "The Flow Service sent a body that is not JSON"


def test_a_problem_written_in_xml_is_read_as_the_services_words(client, upstream):
    problem = '<problem xmlns="urn:ietf:rfc:7807"><title>Lender is suspended</title></problem>'
    upstream.answers(422, problem, "application/problem+xml")
    with pytest.raises(ValidationFailed) as raised:
        create(client)
    assert (raised.value.code, raised.value.reason) == ("http_422", problem)


def test_internals_in_a_json_problem_are_withheld_and_logged_with_the_request_id(client, upstream, caplog):
    upstream.answers(500, json.dumps({"detail": "java.lang.IllegalStateException: no row", "title": "Server error"}))
    with caplog.at_level(logging.WARNING, logger="portal.flowapi"), pytest.raises(UpstreamUnavailable) as raised:
        create(client)
    assert raised.value.reason == "Server error", "the next reason that is fit to show"
    withheld = [record.getMessage() for record in caplog.records if "withheld" in record.getMessage()]
    assert withheld and f"(request {raised.value.request_id})" in withheld[0]


def test_the_backoff_doubles_from_a_fifth_of_a_second_up_to_two_seconds():
    for attempt, ceiling in ((0, 0.2), (1, 0.4), (2, 0.8), (3, 1.6), (4, 2.0), (10, 2.0)):
        delays = [backoff_seconds(attempt) for _ in range(300)]
        assert all(ceiling / 2 <= delay <= ceiling for delay in delays), (attempt, min(delays), max(delays))
        # spread over the whole upper half (jitter): no run of 300 misses the top or bottom tenth of it
        assert min(delays) < ceiling * 0.55 and max(delays) > ceiling * 0.95, (attempt, min(delays), max(delays))


def test_a_retry_after_date_is_read_against_the_clock():
    soon = format_datetime(datetime.now(timezone.utc) + timedelta(seconds=30), usegmt=True)
    assert 25 <= retry_after_seconds(soon) <= 30
    past = format_datetime(datetime.now(timezone.utc) - timedelta(seconds=30), usegmt=True)
    assert retry_after_seconds(past) == 0.0, "a date gone by: try again at once"


SANDBOX_ADVICE = "a production portal does not talk to it: point it at the real Flow Service"


def test_production_refuses_the_sandboxs_token_endpoint_naming_the_setting(make_sandbox, tmp_path):
    settings = production_settings()
    clients = tmp_path / "clients.json"  # a client the sandbox knows, so its token endpoint answers 200
    client = {"client_id": settings["FLOW_CLIENT_ID"], "client_secret": settings["FLOW_CLIENT_SECRET"], "org": "x"}
    clients.write_text(json.dumps([client]))
    sandbox = make_sandbox(SANDBOX_CLIENTS=str(clients))
    config = portal_config(sandbox.url, "sqlite://", **settings)
    with pytest.raises(SandboxInProduction) as raised:
        build_client(load_settings(config)).list_flows()
    assert str(raised.value) == (
        "FLOW_OIDC_URL (or FLOW_TOKEN_URL) points at the Flow Portal sandbox (its answers carry X-Flow-Sandbox); "
        + SANDBOX_ADVICE
    )
    assert (raised.value.status, raised.value.code) == (200, "sandbox_in_production")


def test_production_refuses_the_sandbox_also_when_it_refuses_the_client(make_sandbox):
    """A client the sandbox does not know gets its 401 (marked like every answer of it): the sandbox is named, not
    the credentials, however authlib orders its hooks."""
    sandbox = make_sandbox()
    for _ in range(5):
        with pytest.raises(SandboxInProduction) as raised:
            build_client(load_settings(portal_config(sandbox.url, "sqlite://", **production_settings()))).list_flows()
        assert raised.value.status == 401 and str(raised.value).endswith(SANDBOX_ADVICE)


def test_production_refuses_the_sandboxs_api_with_the_request_named(make_sandbox, trusted_keys_file, client_key):
    sandbox = make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted_keys_file))
    config = portal_config(sandbox.url, "sqlite://", **production_settings(), **jwt_settings(client_key))
    with pytest.raises(SandboxInProduction) as raised:
        build_client(load_settings(config)).list_flows()
    error = raised.value
    assert str(error).startswith("FLOW_API_URL points at the Flow Portal sandbox") and str(error).endswith(
        SANDBOX_ADVICE
    )
    assert (error.status, error.code) == (200, "sandbox_in_production")
    assert error.request_id and error.support_code == f"200 · sandbox_in_production · {error.request_id}"


def test_a_token_endpoint_asking_to_slow_down_is_named_as_the_identity_provider(sandbox):
    sandbox.fault(mode="rate_limit", target="token", retry_after=60)
    client = build_client(load_settings(portal_config(sandbox.url, "sqlite://"), testing=True))
    with pytest.raises(RateLimited) as raised:
        client.list_flows()
    assert str(raised.value).startswith("The identity provider asks us to slow down (HTTP 429)"), str(raised.value)
    assert (raised.value.status, raised.value.retry_after) == (429, 60)


def test_control_characters_in_the_services_words_are_dropped(client, upstream):
    upstream.answers(422, json.dumps({"error": "bad", "message": "Last\x00name\x07 is\x1b[31m\tinvalid\r\nnow"}))
    with pytest.raises(ValidationFailed) as raised:
        create(client)
    assert raised.value.reason == "Lastname is[31m invalid now"


@pytest.mark.parametrize(("length", "shown"), [(300, "x" * 300), (301, "x" * 299 + "…")])
def test_the_services_words_are_cut_at_300_characters(client, upstream, length, shown):
    upstream.answers(422, json.dumps({"error": "bad", "message": "x" * length}))
    with pytest.raises(ValidationFailed) as raised:
        create(client)
    assert raised.value.reason == shown


def swedish(birth: str, serial: str = "987") -> str:
    """A Swedish number written without separator, `birth` YYMMDD (or YYYYMMDD) and a Luhn check digit."""
    return birth + serial + luhn.calc_check_digit(birth[-6:] + serial)


@pytest.mark.parametrize(
    ("birth", "masked"),
    [
        ("810101", True),
        ("811231", True),
        ("811261", True),  # samordningsnummer: the day plus 60
        ("811291", True),
        ("19811231", True),
        ("811301", False),  # no month 13
        ("810001", False),
        ("811200", False),
        ("811232", False),
        ("811260", False),
        ("811292", False),
        ("19811301", False),
    ],
)
def test_a_bare_swedish_number_is_masked_only_with_a_real_birth_date(birth, masked):
    """In the service's words, ten or twelve digits alone are masked only as a valid personnummer: amounts and
    timestamps stay readable."""
    number = swedish(birth)
    shown = redact(f"ref {number} end")
    assert shown == (f"ref {birth}•••• end" if masked else f"ref {number} end")


def test_a_bare_number_with_a_wrong_check_digit_stays_readable():
    number = swedish("811231")
    wrong = number[:-1] + str((int(number[-1]) + 1) % 10)
    assert redact(f"ref {wrong} end") == f"ref {wrong} end"


def test_a_number_with_a_fraction_in_the_services_json_is_no_national_id():
    document = {"amount": 15108695088.5, "id": 15108695088.0}
    assert mask_document(document) == {"amount": 15108695088.5, "id": "151086•••••"}


def test_redact_answers_empty_text_for_anything_not_text():
    assert redact(None) == "" and redact(15108695088) == "" and redact({"id": "15108695088"}) == ""


def test_a_ten_digit_timestamp_in_the_services_json_stays_readable():
    """A Unix time is ten digits, like a Norwegian id that lost its leading zero; only the id is masked."""
    document = {"createdAt": 1700000000, "applicant": 1019012480, "amount": 1234567890}
    assert mask_document(document) == {"createdAt": 1700000000, "applicant": "010190•••••", "amount": 1234567890}


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (None, "ok"),
        (SandboxInProduction(status=200), "sandbox"),
        (UpstreamUnavailable(code="tls"), "tls"),
        (UpstreamTimeout(code="connect_timeout"), "timeout"),
        (UpstreamUnavailable(code="unreachable"), "connection"),
        (UpstreamProtocolError(code="malformed_json"), "malformed"),
        (UpstreamProtocolError(status=200), "malformed"),
        (FlowApiError(), "other"),
        (NotFound(status=404), "http_4xx"),
        (RateLimited(status=429), "http_4xx"),
        (UpstreamUnavailable(status=503), "http_5xx"),
    ],
)
def test_each_outcome_of_a_call_has_its_metrics_word(error, kind):
    assert outcome_kind(error) == kind


def test_an_answer_nested_deeper_than_any_flow_is_refused_at_the_edge(client, upstream):
    """A flow nested some 330 levels deep was read, and the flow page's masking met Python's recursion limit: a 500
    (an attack). Past 64 levels, as a webhook, a 2xx is a protocol error; an error answer's body goes unread."""
    deep = '{"flow": {"id": "f-1", "status": "Opened", "data": ' + "[" * 400 + "]" * 400 + "}}"
    upstream.answers(200, deep)
    with pytest.raises(UpstreamProtocolError) as raised:
        client.get_flow("f-1")
    assert raised.value.code == "too_deep" and "nested deeper than 64 levels" in str(raised.value)
    upstream.answers(404, '{"error": "not_found", "detail": ' + "[" * 400 + "]" * 400 + "}")
    with pytest.raises(NotFound):
        client.get_flow("f-1")
    upstream.answers(200, '{"flow": {"id": "f-1", "status": "Opened", "data": ' + "[" * 60 + "]" * 60 + "}}")
    assert client.get_flow("f-1").flow_id == "f-1", "as deep as a webhook may be: read"


@pytest.mark.parametrize(
    ("encoding", "content_type"), [("utf-16", "application/json"), ("cp037", "application/json; charset=cp037")]
)
def test_an_answer_nested_deep_is_refused_whatever_its_encoding(client, upstream, encoding, content_type):
    """JSON in UTF-16 (read as such from its bytes), or in a charset its Content-Type names, hides its brackets from
    the byte scan: an escaped quote put it out of step, and 400 levels were read (the flow page's 500 of above)."""
    deep = '{"flow": {"id": "f-1", "status": "Opened", "note": "\\"", "data": ' + "[" * 400 + "]" * 400 + "}}"
    upstream.answers(200, deep.encode(encoding), content_type)
    with pytest.raises(UpstreamProtocolError) as raised:
        client.get_flow("f-1")
    assert raised.value.code == "too_deep"


def test_the_look_up_of_a_flow_in_the_list_makes_no_call_past_its_time(client, upstream):
    """A flow's item is read beside a neighbour, up to three calls a tab: with a slow list a flow's page waited for
    six in a row, 21 s (a stand-in). Past the caller's time no further call is made."""
    upstream.answers(200, json.dumps({"data": [{"id": "f-older", "status": "Opened"}], "has_more": True}))
    assert client.listed_item("f-1", archived=False) is None and upstream.calls == 2, "the neighbour, then around it"
    calls = upstream.calls
    with pytest.raises(UpstreamTimeout) as raised:
        client.listed_item("f-1", archived=False, in_time=lambda: False)
    assert upstream.calls == calls + 1 and raised.value.code == "slow_list"


@pytest.fixture
def clocked(sandbox, upstream):
    """The client of the stand-in on a clock the test moves: (client, clock), a retry budget of 3 s."""
    clock = Clock()
    config = portal_config(sandbox.url, "sqlite://", FLOW_API_URL=upstream.url, FLOW_RETRY_BUDGET="3")
    return build_client(load_settings(config, testing=True), ClientClock(clock, clock.sleep)), clock


def test_a_503_s_retry_after_is_waited_as_a_429_s_is(clocked, upstream):
    """RFC 9110: a 503 may say when to come back. It was ignored: retries after 0.1 s and 0.37 s (a stand-in)."""
    client, clock = clocked
    upstream.answers(200, '{"data": []}')
    client.list_flows()  # the token, first
    upstream.answers(503, '{"error": "maintenance"}', **{"Retry-After": "2"})
    with pytest.raises(UpstreamUnavailable):
        client.list_flows()
    assert clock.slept == [2.0], "waited as asked, then no second wait past the budget"


@pytest.mark.parametrize("said", ["0", "Thu, 01 Jan 2015 00:00:00 GMT"])
def test_a_retry_after_of_now_or_the_past_still_waits_the_back_off(clocked, upstream, said):
    """A 0, or a date past on a clock that runs ahead: two retries went out back to back (a stand-in)."""
    client, clock = clocked
    upstream.answers(200, '{"data": []}')
    client.list_flows()
    upstream.answers(429, '{"error": "slow_down"}', **{"Retry-After": said})
    with pytest.raises(RateLimited):
        client.list_flows()
    assert len(clock.slept) == 2 and clock.slept[0] >= 0.1 and clock.slept[1] >= 0.2, clock.slept
