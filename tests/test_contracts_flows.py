"""Contracts of the flow pages that mutation testing found unguarded: resending a refused create, failures that
surely created nothing, pages the browser must not keep, and the security headers of every answer."""

import json
import socket
from html import unescape

import pytest
import requests
import responses
from altservice import LAST_NAME_REASON
from altservice import PORTAL_SETTINGS as ALT_SETTINGS
from support import add_user, form_data, sign_in, submission_token
from test_contracts_flowapi import Upstream

from portal.extensions import db
from portal.models import AuditEntry, CreateSubmission, FlowRecord
from portal.security import CONTENT_SECURITY_POLICY, PERMISSIONS_POLICY

SENT_ALREADY = "was sent already"
MAYBE_CREATED = "may have been created"


def operator_of(app):
    """A test client signed in as a new operator of `app`."""
    client = app.test_client()
    assert sign_in(client, add_user(app, role="operator")).status_code == 302
    return client


def submissions(app) -> int:
    with app.app_context():
        return db.session.query(CreateSubmission).count()


@pytest.fixture
def alt_app(make_app, alt):
    return make_app(
        sandbox_url=alt.url,
        **ALT_SETTINGS,
        WTF_CSRF_ENABLED=False,
    )


def test_a_form_refused_with_422_is_sent_again_once_corrected(alt_app, alt):
    staff = operator_of(alt_app)
    data = form_data(staff, last_name="Refused")
    alt.set(create="invalid")
    refused = staff.post("/flows/new", data=data)
    assert refused.status_code == 422
    assert LAST_NAME_REASON in refused.text and MAYBE_CREATED not in refused.text
    assert submissions(alt_app) == 0, "nothing was created: the form's token is free again"
    alt.set(create="design")
    corrected = staff.post("/flows/new", data=data | {"last_name": "Nordmann"})
    assert corrected.status_code == 302, corrected.text
    assert corrected.headers["Location"].startswith("/flows/") and corrected.headers["Location"] != "/flows"
    assert alt.counts["create"] == 2 and alt.flows[0].last_name == "Nordmann"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def assert_surely_not_created(app, data: dict) -> None:
    """The create failed before the service could act: said so, and the same form can be sent again at once."""
    staff = operator_of(app)
    data = form_data(staff) | data
    first = staff.post("/flows/new", data=data)
    assert first.status_code in (502, 503, 504), first.status_code
    assert "The flow was not created" in first.text and MAYBE_CREATED not in first.text
    assert "You can send the form again. (for support: " in first.text, "the support code, in its own words"
    assert submissions(app) == 0
    again = staff.post("/flows/new", data=data)
    assert again.status_code == first.status_code and SENT_ALREADY not in again.text


def test_an_unreachable_service_surely_created_nothing(make_app, sandbox):
    """Nothing listens at the address: no connection, nothing sent."""
    app = make_app(FLOW_API_URL=f"http://127.0.0.1:{closed_port()}", FLOW_OIDC_URL=sandbox.url, WTF_CSRF_ENABLED=False)
    assert_surely_not_created(app, {})


def test_a_create_to_an_https_address_that_speaks_no_tls_may_have_created_the_flow(make_app, sandbox):
    """OpenSSL says the same (WRONG_VERSION_NUMBER) for a service that speaks no TLS at all and for a TLS terminator
    that writes plain HTTP once the request is in (found by a re-check), so a create cannot be taken for never sent:
    the form is kept, and a resend looks for the flow first. (`flask --app portal check` names the first case.)"""
    port = int(sandbox.url.rsplit(":", 1)[1])
    app = make_app(FLOW_API_URL=f"https://127.0.0.1:{port}", FLOW_OIDC_URL=sandbox.url, WTF_CSRF_ENABLED=False)
    staff = operator_of(app)
    first = staff.post("/flows/new", data=form_data(staff))
    assert first.status_code in (502, 503, 504) and MAYBE_CREATED in first.text
    assert submissions(app) == 1, "the token stays claimed: a resend cannot create a second flow"


@responses.activate
def test_a_connect_timeout_surely_created_nothing(make_app, sandbox):
    """A connect timeout (the sandbox cannot make one) means the request never left."""
    api = "http://flow-api.invalid"
    responses.add_passthru(sandbox.url)
    responses.add(responses.POST, f"{api}/api/flows", body=requests.ConnectTimeout("connect timed out"))
    app = make_app(FLOW_API_URL=api, FLOW_OIDC_URL=sandbox.url, WTF_CSRF_ENABLED=False)
    assert_surely_not_created(app, {})


def test_a_read_timeout_may_have_created_the_flow(make_app, sandbox):
    """The other side of the line: the request reached the service, which did not answer in time."""
    app = make_app(FLOW_READ_TIMEOUT="0.5", WTF_CSRF_ENABLED=False)
    staff = operator_of(app)
    data = form_data(staff)
    sandbox.fault(mode="timeout", seconds=1.5, count=1)
    first = staff.post("/flows/new", data=data)
    assert first.status_code == 504 and MAYBE_CREATED in first.text
    assert submissions(app) == 1, "the token stays claimed: a resend cannot create a second flow"


def test_a_form_sent_without_its_submission_token_creates_nothing(make_app, sandbox):
    """The token comes from the form as opened; a post without it is never given a fresh one."""
    app = make_app(WTF_CSRF_ENABLED=False)
    staff = operator_of(app)
    data = form_data(staff)
    del data["submission"]
    before = len(sandbox.api("GET", "/api/flows?limit=100").json()["data"])
    answer = staff.post("/flows/new", data=data)
    assert answer.status_code == 200 and "The form expired or is incomplete" in answer.text
    assert len(sandbox.api("GET", "/api/flows?limit=100").json()["data"]) == before
    assert submissions(app) == 0
    again = staff.post("/flows/new", data=data | {"submission": submission_token(answer)})
    assert again.status_code == 302, "the form as shown again carries a token of its own, and is sent once more"
    assert len(sandbox.api("GET", "/api/flows?limit=100").json()["data"]) == before + 1


@pytest.mark.parametrize("path", ["/login", "/flows", "/flows/new", "/events", "/no-such-page"])
def test_html_pages_are_never_stored_by_the_browser(signed_in, path):
    staff = signed_in("operator")
    page = staff.get(path)
    assert page.mimetype == "text/html"
    assert page.headers["Cache-Control"] == "no-store"


def test_static_files_may_be_cached(client):
    with client.get("/static/css/portal.css") as answer:
        assert answer.status_code == 200 and answer.mimetype == "text/css"
        assert "no-store" not in answer.headers.get("Cache-Control", "")


EXPECTED_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Permissions-Policy": PERMISSIONS_POLICY,
}


@pytest.mark.parametrize("path", ["/login", "/flows", "/healthz", "/static/css/portal.css"])
def test_every_answer_carries_the_security_headers(client, path):
    with client.get(path) as answer:
        assert {name: answer.headers.get(name) for name in EXPECTED_HEADERS} == EXPECTED_HEADERS
        assert "Strict-Transport-Security" not in answer.headers, "plain http: no HSTS"


def test_a_refused_host_carries_the_security_headers_too(client):
    refused = client.get("/login", headers={"Host": "evil.example"})
    assert refused.status_code == 400
    assert {name: refused.headers.get(name) for name in EXPECTED_HEADERS} == EXPECTED_HEADERS


def test_https_answers_carry_hsts(make_app):
    app = make_app(PORTAL_PUBLIC_URL="https://portal.example", PORTAL_TRUSTED_HOSTS="portal.example")
    answer = app.test_client().get("/login", base_url="https://portal.example")
    assert answer.headers["Strict-Transport-Security"] == "max-age=31536000; includeSubDomains"
    assert answer.headers["X-Frame-Options"] == "DENY"


@pytest.fixture
def upstream_app(make_app, sandbox, serve):
    """The portal against a stand-in Flow API that answers what the test sets (tokens from the sandbox)."""
    upstream = Upstream(serve)
    app = make_app(FLOW_API_URL=upstream.url, FLOW_OIDC_URL=sandbox.url, WTF_CSRF_ENABLED=False)
    return app, upstream


def create_answered(upstream_app, status: int, body: dict):
    """A new operator sends the create form while the stand-in answers `status` with `body`: the app and the page."""
    app, upstream = upstream_app
    upstream.answers(status, json.dumps(body))
    staff = operator_of(app)
    return app, staff.post("/flows/new", data=form_data(staff))


def test_the_services_field_errors_land_on_the_fields_whatever_their_spelling(upstream_app):
    details = [
        {"field": "last_name", "message": "Too short"},
        {"field": "Redirect-URL", "message": "Not https"},
        {"field": "NATIONALID", "message": "Not accepted"},
        {"field": "loanAmount", "message": "Above the limit"},
    ]
    refusal = {"error": "validation_error", "message": "Invalid", "details": details}
    _, page = create_answered(upstream_app, 422, refusal)
    assert page.status_code == 422
    text = unescape(page.text)
    for message in ("Too short", "Not https", "Not accepted"):
        assert text.count(f"The Flow Service says: {message}") == 1, message
    assert text.index("Too short") > text.index('name="last_name"') > text.index("Not accepted")
    # The service's own words, then a field the form lacks, named (a stand-in: "weird" alone, the words dropped).
    assert "The Flow Service did not accept the flow: Invalid; loanAmount: Above the limit" in text


def test_the_services_words_about_the_whole_request_are_said_beside_its_field_errors(upstream_app):
    refusal = {
        "title": "Validation failed",
        "detail": "The national id is not valid",
        "invalid-params": [{"name": "nationalId", "reason": "checksum mismatch"}],
    }
    _, page = create_answered(upstream_app, 400, refusal)
    text = unescape(page.text)
    assert "The Flow Service says: checksum mismatch" in text
    assert "The Flow Service did not accept the flow: The national id is not valid" in text
    field_only = {"invalid-params": [{"name": "nationalId", "reason": "checksum mismatch"}]}
    _, page = create_answered(upstream_app, 400, field_only)
    assert "did not accept the flow" not in unescape(page.text), "no reason but the field's: said under it alone"


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        ({"flowId": "8d7c2b47-1111-4222-8333-944455556666", "referenceId": "15108695088"}, "Flow 151086••••• was"),
        ({"referenceId": "LA-131052-308T"}, "accepted the flow LA-131052-•••• but"),
    ],
)
def test_a_reference_that_holds_a_national_id_is_masked_in_the_created_message(upstream_app, body, shown):
    """The message named the flow by its reference as the service sent it (an attack: "Flow 15108695088 was
    created."), and a message waits in the session cookie, signed, not encrypted, until it is shown."""
    app, upstream = upstream_app
    upstream.answers(201, json.dumps(body))
    staff = operator_of(app)
    staff.post("/flows/new", data=form_data(staff))
    with staff.session_transaction() as session:
        said = " ".join(message for _category, message in session.get("_flashes", []))
    assert shown in said and "15108695088" not in said and "131052-308T" not in said, said
    with app.app_context():
        targets = [entry.target for entry in db.session.query(AuditEntry).filter_by(action="create_flow")]
    assert targets and not any("15108695088" in target or "131052-308T" in target for target in targets), targets


def test_a_refusal_without_field_errors_says_the_services_reason(upstream_app):
    _, page = create_answered(upstream_app, 422, {"error": "validation_error", "message": "Lender is suspended"})
    assert page.status_code == 422
    refusal = (
        '<div class="alert alert-danger" role="alert">The Flow Service did not accept the flow: Lender is suspended'
    )
    assert refusal in page.text, "an error, read out"


def test_a_conflict_on_create_is_a_409_and_frees_the_form(upstream_app):
    conflict = {"error": "conflict", "message": "An open flow exists for this person"}
    app, page = create_answered(upstream_app, 409, conflict)
    assert page.status_code == 409
    assert "The Flow Service did not accept the flow: An open flow exists for this person" in unescape(page.text)
    assert submissions(app) == 0


@pytest.mark.parametrize("status", [401, 403, 404, 429])
def test_a_create_the_service_refused_surely_created_nothing(upstream_app, status):
    app, page = create_answered(upstream_app, status, {"error": "refused", "message": "Not now"})
    assert "The flow was not created" in page.text and MAYBE_CREATED not in page.text
    assert submissions(app) == 0
    assert '<div class="alert alert-danger" role="alert">The flow was not created' in page.text, "an error, read out"
    assert "<title>Error: New flow · Flow Portal</title>" in page.text, "and said first in the title (a walk)"
    assert f"(for support: {status} · refused · " in unescape(page.text), "the code support asks for"


@pytest.mark.parametrize("status", [500, 502])
def test_a_create_the_service_failed_to_answer_may_have_created_the_flow(upstream_app, status):
    app, page = create_answered(upstream_app, status, {"error": "broken", "message": "Internal failure"})
    assert page.status_code == 504 and MAYBE_CREATED in page.text
    assert submissions(app) == 1
    assert '<div class="alert alert-warning" role="alert">The Flow Service did not confirm the flow.' in page.text


def test_a_created_flow_is_announced_as_a_success_also_when_the_service_calls_its_id_id(upstream_app):
    app, upstream = upstream_app
    flow_id = "3f1e2d4c-5b6a-4789-8abc-def012345678"
    upstream.answers(201, json.dumps({"id": flow_id, "referenceId": "LA-7"}))
    staff = operator_of(app)
    answer = staff.post("/flows/new", data=form_data(staff))
    assert answer.status_code == 302 and answer.headers["Location"] == f"/flows/{flow_id}"
    page = staff.get("/events")  # the notice shows on the next page, whichever it is
    assert '<div class="alert alert-success" role="status">Flow LA-7 was created.</div>' in page.text


def test_the_form_sends_its_webhook_address_and_the_index_keeps_its_country(alt_app, alt):
    staff = operator_of(alt_app)
    answer = staff.post("/flows/new", data=form_data(staff, webhook_url=" https://lender.example/hooks "))
    assert answer.status_code == 302, answer.text
    assert alt.flows[0].webhook_url == "https://lender.example/hooks"
    assert alt_app.extensions["flow_index"].flush(10), "the index writer did not finish"
    with alt_app.app_context():
        assert [record.country for record in db.session.query(FlowRecord)] == ["no"]


def test_archived_flows_in_the_current_list_are_counted_as_their_rows_read_them(upstream_app):
    """The notice counted only `true`; the rows read 1 and "true" as archived too: "1 archived" beside three rows
    marked so (a stand-in)."""
    app, upstream = upstream_app
    items = [
        {"id": f"0000000{n}-1111-4222-8333-944455556666", "status": "Opened", "archived": said}
        for n, said in enumerate([True, 1, "true", False, "yes", "maybe"])
    ]
    upstream.answers(200, json.dumps({"data": items, "has_more": False}))
    page = operator_of(app).get("/flows")
    assert "The Flow Service included 4 archived flows in the current list." in unescape(page.text)


def test_a_creation_time_the_portal_cannot_read_is_shown_as_the_list_sent_it(upstream_app):
    """ "20/11/2026 10:00" read as no time: the list showed "—" and said nothing, where the flow's page shows the
    service's own text (a stand-in)."""
    app, upstream = upstream_app
    item = {"id": "00000001-1111-4222-8333-944455556666", "status": "Opened", "createdAt": "20/11/2026 10:00"}
    upstream.answers(200, json.dumps({"data": [item], "has_more": False}))
    page = operator_of(app).get("/flows")
    assert 'title="Not a time the portal can read">20/11/2026 10:00</span>' in page.text


def test_a_201_whose_body_is_no_json_is_a_flow_created_without_its_id(upstream_app):
    """ "201 Created" with an HTML body and no Location read as an answer that never came: "may have been created",
    a 504 (a stand-in). The service said it created the flow: the list finds it, and the form is not sent again."""
    app, upstream = upstream_app
    upstream.answers(201, "<html><body>Created</body></html>", content_type="text/html")
    staff = operator_of(app)
    answer = staff.post("/flows/new", data=form_data(staff))
    assert (answer.status_code, answer.headers.get("Location")) == (302, "/flows")
    with staff.session_transaction() as session:
        said = " ".join(message for _category, message in session.get("_flashes", []))
    assert "accepted the flow" in said and "may have been created" not in said, said


def test_a_refusal_that_says_nothing_says_so_once_with_its_support_code(upstream_app):
    """A 422 with an HTML body read "did not accept the flow: The Flow Service did not accept that. Check the
    address…", the refusal said twice and no code to give support (a stand-in)."""
    _, page = create_answered_as(upstream_app, 422, "<html><body>Unprocessable</body></html>", "text/html")
    text = unescape(page.text)
    assert "The Flow Service did not accept the flow and did not say why (for support: 422 · " in text
    assert "did not accept the flow: The Flow Service did not accept that" not in text


def create_answered_as(upstream_app, status: int, body: str, content_type: str):
    app, upstream = upstream_app
    upstream.answers(status, body, content_type=content_type)
    staff = operator_of(app)
    return app, staff.post("/flows/new", data=form_data(staff))


def test_a_flow_listed_twice_on_one_page_is_shown_each_time_and_said(upstream_app):
    """Items 0, 1, 0, 2, 1: each shown twice under "5 flows on this page", unsaid (a stand-in)."""
    app, upstream = upstream_app
    ids = [f"0000000{n}-1111-4222-8333-944455556666" for n in (0, 1, 0, 2, 1)]
    upstream.answers(200, json.dumps({"data": [{"id": i, "status": "Opened"} for i in ids], "has_more": False}))
    page = operator_of(app).get("/flows")
    assert "The Flow Service listed 2 flows more than once on this page; each is shown each time." in page.text


def test_list_entries_that_are_no_objects_are_said_as_such(upstream_app):
    """null, 42 and "x" in the list were said to be flows "without any details (as its specification shows)",
    which describes {} items (a stand-in)."""
    app, upstream = upstream_app
    good = {"id": "00000001-1111-4222-8333-944455556666", "status": "Opened"}
    upstream.answers(200, json.dumps({"data": [good, None, 42, "x", {}], "has_more": False}))
    text = unescape(operator_of(app).get("/flows").text)
    assert "The Flow Service sent 3 entries that are not flows (no JSON objects) in the list" in text
    assert "lists 1 flow without any details" in text and "without an id" not in text


def test_has_more_false_beside_the_offset_it_echoes_is_the_end_of_the_list(upstream_app):
    """`has_more: false` with the `offset` asked for said back (no total, no next link): the portal's own guess of
    the next offset was taken for a next page the service named, and the last page offered Next and said the service
    contradicted itself (a review)."""
    app, upstream = upstream_app
    items = [{"id": f"0000000{n}-1111-4222-8333-944455556666", "status": "Opened"} for n in range(3)]
    upstream.answers(200, json.dumps({"data": items, "has_more": False, "offset": 0, "limit": 10}))
    page = unescape(operator_of(app).get("/flows").text)
    assert "yet names a next page" not in page
    assert 'rel="next"' not in page, "the last page offers no Next"


def test_a_has_more_of_neither_yes_nor_no_beside_more_flows_than_asked_is_not_called_the_last_page(upstream_app):
    """`has_more: "maybe"` and 15 flows where 10 were asked for: the page is cut to 10 and Next goes on, yet it said
    "fewer flows than asked for: most likely this is the last page" (a review)."""
    app, upstream = upstream_app
    items = [{"id": f"000000{n:02d}-1111-4222-8333-944455556666", "status": "Opened"} for n in range(15)]
    upstream.answers(200, json.dumps({"data": items, "has_more": "maybe"}))
    page = unescape(operator_of(app).get("/flows").text)
    assert 'rel="next"' in page, "Next goes on from the flows shown"
    assert "fewer flows than asked for" not in page and "most likely this is the last page" not in page
