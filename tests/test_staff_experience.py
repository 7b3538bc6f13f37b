"""What a staff member meets: a flow page that answers first, input that is never lost, a language that is kept."""

import html
import re

import pytest
from altservice import PORTAL_SETTINGS as ALT_SETTINGS
from support import PASSWORD, add_user, deliver_signed, set_account_language, sign_in

from portal.accounts import change_role
from portal.extensions import db
from portal.flowapi.records import parse_timestamp
from portal.models import User
from portal.presentation import local_time

TYPED = {
    "country": "no",
    "national_id": "15108695088",
    "last_name": "Nordmann-Åsen",
    "redirect_url": "https://a.example/",
    "real_person": "y",
}
CSRF = re.compile(r'name="csrf_token" type="hidden" value="([^"]+)"')
TYPED_BY = re.compile(r'name="typed_by" type="hidden" value="([^"]+)"')


def new_form_token(client) -> str:
    return client.get("/flows/new").text.split('name="submission" type="hidden" value="')[1].split('"')[0]


def keeps_what_was_typed(page: str) -> None:
    assert 'value="15108695088"' in page and 'value="Nordmann-Åsen"' in page
    assert '<option selected value="no">' in page
    assert 'value="https://a.example/"' in page


def test_a_create_with_the_service_down_keeps_the_form_and_says_what_to_do(make_app):
    app = make_app(sandbox_url="http://127.0.0.1:9", WTF_CSRF_ENABLED=False, FLOW_RETRY_BUDGET="0")
    add_user(app, "kari", "operator")
    client = app.test_client()
    sign_in(client, "kari")
    answer = client.post("/flows/new", data={**TYPED, "submission": new_form_token(client)})
    assert answer.status_code in (502, 503)
    keeps_what_was_typed(answer.text)
    assert "The flow was not created" in answer.text and "You can send the form again." in answer.text
    assert '<h1 class="h3 mb-3">New flow</h1>' in answer.text, "the form, not an error page"


def test_a_create_with_an_expired_security_token_keeps_the_form(make_app, make_user, sandbox):
    app = make_app()
    client = app.test_client()
    username = make_user("operator")
    before = CSRF.search(client.get("/login").text)[1]
    assert (
        client.post("/login", data={"username": username, "password": PASSWORD, "csrf_token": before}).status_code
        == 302
    )
    page = client.get("/flows/new").text
    submission = page.split('name="submission" type="hidden" value="')[1].split('"')[0]
    answer = client.post("/flows/new", data={**TYPED, "submission": submission, "csrf_token": before})
    assert answer.status_code == 400
    keeps_what_was_typed(answer.text)
    assert "security token expired, so nothing was sent" in answer.text
    fresh = CSRF.search(answer.text)[1]
    assert fresh != before, "the kept form carries a token that works"
    created = client.post("/flows/new", data={**TYPED, "submission": submission, "csrf_token": fresh})
    assert created.status_code == 302 and "/flows/" in created.headers["Location"]


def signed_in_with_csrf(client, username: str) -> None:
    token = CSRF.search(client.get("/login").text)[1]
    answer = client.post("/login", data={"username": username, "password": PASSWORD, "csrf_token": token})
    assert answer.status_code == 302


def sign_in_on(page: str, client, username: str, password: str = PASSWORD, served_at: str = "/login"):
    """Sign in on a sign-in page as a browser would: every field of its form as it is, with the name and password,
    sent where the form says (its action, else the address the page was served at)."""
    target, fields = sign_in_form(page, served_at)
    return client.post(target, data=fields | {"username": username, "password": password})


def sign_in_form(page: str, served_at: str) -> tuple[str, dict[str, str]]:
    """Where a sign-in page's form goes and its fields as they are."""
    form = page.split('<form method="post"', 1)[1].split("</form>", 1)[0]
    action = re.match(r'\s+action="([^"]*)"', form)
    fields = {}
    for tag in re.findall(r"<input\b[^>]*>", form):
        name, value = re.search(r'name="([^"]+)"', tag), re.search(r'value="([^"]*)"', tag)
        if name:
            fields[name[1]] = html.unescape(value[1]) if value else ""
    return (html.unescape(action[1]) if action else served_at), fields


def sent_after_the_session_ended(app, client, username: str, ended_by: str = "sign_out"):
    """`username` types a new flow, its session ends (signed out in another tab, or idle) and the form is sent:
    the answer (the sign-in page carrying what was typed)."""
    signed_in_with_csrf(client, username)
    page = client.get("/flows/new").text
    typed = {**TYPED, "submission": new_form_token(client), "csrf_token": CSRF.search(page)[1]}
    typed["typed_by"] = TYPED_BY.search(page)[1]  # whose input it is, as the browser sends the form
    if ended_by == "sign_out":
        client.post("/logout", data={"csrf_token": CSRF.search(page)[1]})
    clock = app.extensions["portal.clock"]
    if ended_by == "idle":
        app.extensions["portal.clock"] = lambda: clock() + 3 * 3600  # past the idle timeout
    answer = client.post("/flows/new", data=typed)
    app.extensions["portal.clock"] = clock
    return answer


@pytest.mark.parametrize("ended_by", ["sign_out", "idle"])
def test_a_create_sent_after_the_session_ended_keeps_what_was_typed_through_the_sign_in(
    make_app, make_user, sandbox, ended_by
):
    """Signed out in another tab (or idle) while typing a new flow: the form sent then gave "Your session expired",
    and what was typed was gone after signing in (found by a new user)."""
    app = make_app()
    client, username = app.test_client(), make_user("operator")
    answer = sent_after_the_session_ended(app, client, username, ended_by)
    assert answer.status_code == 401 and "what you typed is kept" in answer.text
    assert 'name="username"' in answer.text
    mistyped = sign_in_on(answer.text, client, username, password="not it", served_at="/flows/new")
    assert "Wrong username or password" in mistyped.text and 'value="15108695088"' in mistyped.text, "still kept"
    again = sign_in_on(mistyped.text, client, username, served_at="/login")
    assert again.status_code == 200 and "What you typed is kept: check it and select Create flow." in again.text
    keeps_what_was_typed(again.text)
    assert re.search(r'<input checked[^>]*name="real_person"', again.text), "the person's agreement, ticked, kept"
    fields = {**TYPED, "submission": new_form_token_of(again.text), "csrf_token": CSRF.search(again.text)[1]}
    created = client.post("/flows/new", data=fields)
    assert created.status_code == 302 and "/flows/" in created.headers["Location"]


@pytest.mark.parametrize("ended_by", ["sign_out", "idle"])
def test_what_one_account_typed_is_not_offered_to_another_signing_in_on_its_page(
    make_app, make_user, sandbox, ended_by
):
    """Someone else signing in on the sign-in page that carries what was typed got it back as their own: "You are
    signed in again. What you typed is kept" (found by a re-check)."""
    app = make_app()
    client, typist, other = app.test_client(), make_user("operator"), make_user("operator")
    answer = sent_after_the_session_ended(app, client, typist, ended_by)
    assert answer.status_code == 401 and 'value="15108695088"' in answer.text
    signed_in = sign_in_on(answer.text, client, other, served_at="/flows/new")
    assert signed_in.status_code == 302 and signed_in.headers["Location"].endswith("/flows/new")
    form = client.get("/flows/new").text
    assert "another account&#39;s: it is not kept" in form or "another account's: it is not kept" in form
    assert "15108695088" not in form and "Nordmann" not in form


def test_a_form_sent_after_another_account_signed_in_at_the_browser_keeps_nothing_for_it(make_app, make_user, sandbox):
    """Signed out in another tab and signed in there as someone else: the first tab's form, sent with its spent
    token, came back filled in for the other account ("security token expired… what you typed is kept"; found by
    a re-check)."""
    app = make_app()
    client, typist, other = app.test_client(), make_user("operator"), make_user("operator")
    signed_in_with_csrf(client, typist)
    page = client.get("/flows/new").text
    typed = {**TYPED, "submission": new_form_token(client), "csrf_token": CSRF.search(page)[1]}
    typed["typed_by"] = TYPED_BY.search(page)[1]
    client.post("/logout", data={"csrf_token": CSRF.search(page)[1]})
    signed_in_with_csrf(client, other)
    answer = client.post("/flows/new", data=typed)
    assert answer.status_code == 400 and "15108695088" not in answer.text and "Nordmann" not in answer.text
    assert "another account&#39;s: it is not kept" in answer.text
    client.post("/logout", data={"csrf_token": CSRF.search(client.get("/flows/new").text)[1]})
    signed_in_with_csrf(client, typist)
    own = client.post("/flows/new", data=typed)
    assert own.status_code == 400 and 'value="15108695088"' in own.text, "its own account still gets it back"


def test_a_viewer_signing_in_on_a_page_carrying_another_s_input_hears_nothing_of_roles(make_app, make_user, sandbox):
    app = make_app()
    client, typist, viewer = app.test_client(), make_user("operator"), make_user("viewer")
    answer = sent_after_the_session_ended(app, client, typist)
    signed_in = sign_in_on(answer.text, client, viewer, served_at="/flows/new")
    assert signed_in.status_code == 302 and signed_in.headers["Location"].endswith("/flows")
    listing = html.unescape(client.get("/flows").text)
    assert "another account's: it is not kept" in listing and "Your role no longer" not in listing


def test_an_operator_made_a_viewer_while_typing_is_told_the_form_was_not_sent(make_app, make_user, sandbox):
    """The role change ended the session; signed in again, the person met a bare 403 and the input was gone, with
    nothing said of the role (found by a new user)."""
    app = make_app()
    client, username = app.test_client(), make_user("operator")
    signed_in_with_csrf(client, username)
    page = client.get("/flows/new").text
    typed = {**TYPED, "submission": new_form_token(client), "csrf_token": CSRF.search(page)[1]}
    with app.app_context():
        change_role(db.session.query(User).filter_by(username=username).one(), "viewer", actor="admin")
        db.session.commit()
    answer = client.post("/flows/new", data=typed)
    assert answer.status_code == 401
    signed_in = sign_in_on(answer.text, client, username, served_at="/flows/new")
    assert signed_in.status_code == 302 and signed_in.headers["Location"].endswith("/flows")
    listing = html.unescape(client.get("/flows").text)
    assert "Your role no longer lets you create flows, so what you typed was not sent." in listing


def test_reloading_the_form_a_sign_in_gave_back_shows_it_again_not_session_expired(make_app, make_user, sandbox):
    """Reload on the New flow form restored by a sign-in sends that sign-in again, with its spent token: it said
    "Your session expired" and what was typed was gone (found by a re-check)."""
    app = make_app()
    client, username = app.test_client(), make_user("operator")
    answer = sent_after_the_session_ended(app, client, username)
    target, fields = sign_in_form(answer.text, "/flows/new")
    sent = fields | {"username": username, "password": PASSWORD}
    assert "What you typed is kept" in client.post(target, data=sent).text
    reloaded = client.post(target, data=sent)
    assert reloaded.status_code == 200 and "Your session expired" not in reloaded.text
    keeps_what_was_typed(reloaded.text)
    from_elsewhere = client.post(target, data=sent, headers={"Sec-Fetch-Site": "cross-site"})
    assert from_elsewhere.status_code == 302 and "15108695088" not in from_elsewhere.text
    plain = fields | {"username": username, "password": PASSWORD, "next": "/events"}
    plain = {name: value for name, value in plain.items() if not name.startswith("kept-")}
    assert client.post(target, data=plain).headers["Location"].endswith("/events"), "a plain sign-in: its next"


def test_changing_the_language_on_the_sign_in_page_that_carries_input_keeps_it(make_app, make_user, sandbox):
    """The language chosen on the sign-in page that carried a New flow form's input threw the input away."""
    app = make_app()
    client, username = app.test_client(), make_user("operator")
    answer = sent_after_the_session_ended(app, client, username)
    language_form = answer.text[answer.text.index('<form method="post" action="/language"') :]
    target, fields = sign_in_form(language_form, "/flows/new")
    assert target == "/language"
    swedish = client.post(target, data=fields | {"language": "sv"})
    assert swedish.status_code == 200 and '<html lang="sv"' in swedish.text and "Logga in" in swedish.text
    assert swedish.text.count('value="15108695088"') == 2, "carried by the sign-in form and the language form"
    again = sign_in_on(swedish.text, client, username, served_at="/language")
    assert again.status_code == 200
    keeps_what_was_typed(again.text)
    plain = client.post("/language", data={"language": "en", "next": "/flows", "csrf_token": fields["csrf_token"]})
    assert plain.status_code == 302 and plain.headers["Location"].endswith("/flows"), "no input: back to the page"


def test_changing_the_language_on_the_new_flow_page_keeps_what_was_typed(make_app, make_user, sandbox):
    """A Swedish operator half-way through a New flow form chose Svenska in the footer: the form came back empty."""
    app = make_app()
    client, username = app.test_client(), make_user("operator")
    signed_in_with_csrf(client, username)
    page = client.get("/flows/new").text
    carried = {f"kept-{name}": value for name, value in TYPED.items()} | {"kept-typed_by": TYPED_BY.search(page)[1]}
    language_form = {"language": "sv", "next": "/flows/new", "csrf_token": CSRF.search(page)[1]}
    swedish = client.post("/language", data=language_form | carried)
    assert swedish.status_code == 200 and '<html lang="sv"' in swedish.text and "Nytt flöde" in swedish.text
    keeps_what_was_typed(swedish.text)
    assert "signed in again" not in swedish.text and "inloggad igen" not in swedish.text
    untouched = client.post("/language", data=language_form | {"language": "fi"})
    assert untouched.status_code == 302 and untouched.headers["Location"].endswith("/flows/new"), "nothing typed"


@pytest.mark.parametrize(
    "came_from",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Origin": "https://evil.example"},  # a browser without Fetch Metadata (found by an attack)
        {"Origin": "null"},
        {"Referer": "https://evil.example/form"},
    ],
    ids=["fetch metadata", "origin", "opaque origin", "referer"],
)
def test_a_create_form_sent_signed_out_from_another_site_keeps_nothing(make_app, make_user, sandbox, came_from):
    """Another site's form must not put its words in front of someone who then signs in."""
    app = make_app()
    client = app.test_client()
    answer = client.post("/flows/new", data=TYPED, headers=came_from)
    assert "15108695088" not in answer.text
    own = client.post("/flows/new", data=TYPED, headers={"Origin": "http://localhost"})
    assert own.status_code == 401 and 'value="15108695088"' in own.text, "the portal's own form, from a browser alike"


def new_form_token_of(page: str) -> str:
    return page.split('name="submission" type="hidden" value="')[1].split('"')[0]


def test_an_expired_token_elsewhere_offers_to_try_again_on_the_page_it_came_from(make_app, make_user, sandbox):
    app = make_app()
    client = app.test_client()
    username = make_user("viewer")
    token = CSRF.search(client.get("/login").text)[1]
    client.post("/login", data={"username": username, "password": PASSWORD, "csrf_token": token})
    flow_id = sandbox.create()["flowId"]
    referer = f"http://localhost/flows/{flow_id}"
    answer = client.post(f"/flows/{flow_id}/refresh", data={"csrf_token": "stale"}, headers={"Referer": referer})
    assert answer.status_code == 400 and "Your session expired" in answer.text
    assert f'href="/flows/{flow_id}">Try again</a>' in answer.text
    elsewhere = client.post(
        f"/flows/{flow_id}/refresh", data={"csrf_token": "stale"}, headers={"Referer": "https://evil.example/x"}
    )
    assert "Try again" not in elsewhere.text
    for path in ("//evil.example/x", "/\\evil.example/x"):  # our host, a path a browser reads as another site
        off_site = client.post(
            f"/flows/{flow_id}/refresh", data={"csrf_token": "stale"}, headers={"Referer": f"http://localhost{path}"}
        )
        assert off_site.status_code == 400 and "Try again" not in off_site.text, path
    searched = client.post(  # a page whose address holds a national id typed there: no link that shows it whole
        f"/flows/{flow_id}/refresh",
        data={"csrf_token": "stale"},
        headers={"Referer": "http://localhost/flows?q=15108695088"},
    )
    assert searched.status_code == 400 and "15108695088" not in searched.text


def test_the_chosen_language_is_kept_in_the_account(app, make_user):
    username = make_user("viewer")
    first = app.test_client()
    sign_in(first, username)
    first.post("/language", data={"language": "fi", "next": "/flows"})
    with app.app_context():
        assert db.session.query(User).filter_by(username=username).one().language == "fi"
    other_browser = app.test_client()
    sign_in(other_browser, username)
    page = other_browser.get("/flows", headers={"Accept-Language": "sv"}).text
    assert '<html lang="fi">' in page, "the account's choice wins over the browser's"
    first.post("/language", data={"language": "nb"})
    assert '<html lang="nb">' in other_browser.get("/flows").text, "a change holds in every browser at once"


def test_a_choice_made_on_the_sign_in_page_wins_and_is_kept(app, make_user):
    username = make_user("viewer")
    set_account_language(app, username, "fi")
    client = app.test_client()
    client.post("/language", data={"language": "sv", "next": "/login"})
    sign_in(client, username)
    assert '<html lang="sv">' in client.get("/flows").text, "chosen just now, on the sign-in page"
    with app.app_context():
        assert db.session.query(User).filter_by(username=username).one().language == "sv"
    client.post("/logout")
    page = client.get("/login", headers={"Accept-Language": "nb"}).text
    assert '<html lang="nb">' in page, "after sign-out the next person at this browser starts from their own"


def test_a_language_form_open_too_long_asks_again_on_its_page(make_app):
    client = make_app().test_client()
    answer = client.post("/language", data={"language": "fi", "next": "/login", "csrf_token": "stale"})
    assert answer.status_code == 302 and answer.headers["Location"] == "/login"
    assert "choose the language again" in client.get("/login").text


def positions(page: str, *markers: str) -> list[int]:
    found = [page.find(marker) for marker in markers]
    assert -1 not in found, dict(zip(markers, found, strict=True))
    return found


def test_the_flow_page_answers_first_and_folds_the_technical_fields(signed_in, sandbox):
    flow_id = sandbox.create(webhookUrl="https://lender.example/hooks")["flowId"]
    client = signed_in("operator")
    page = client.get(f"/flows/{flow_id}").text
    order = positions(
        page,
        'data-testid="national-id"',  # who
        'data-testid="detail-status"',  # the consent status
        'id="timeline-heading"',  # what happened
        'data-testid="actions"',  # what can be done
        'data-testid="technical"',  # the service's fields, folded
        "Process instance",
    )
    assert order == sorted(order)
    assert re.search(r'<details class="technical[^"]*" data-testid="technical">', page), "folded by default"
    assert '>Open the sandbox consent page<span class="visually-hidden"> (opens in a new tab)</span></a>' in page, (
        "consent is pending"
    )
    assert "Assign, Cancel" in page and "offers no endpoint for them" in page
    assert not re.search(r"<(a|button)[^>]*>\s*(Assign|Cancel)\s*<", page), "the service's actions are not clickable"


def test_the_sandbox_consent_link_goes_once_the_consent_is_given(app, signed_in, sandbox):
    flow_id = sandbox.create()["flowId"]
    sandbox.control(flow_id, "accept")
    client = signed_in("viewer")
    client.get("/flows")  # the list tells the consent status
    assert app.extensions["flow_index"].flush(10), "the index writer did not finish"
    page = client.get(f"/flows/{flow_id}").text
    assert "Open the sandbox consent page" not in page
    said = re.search(r'data-testid="consent-time">(.*?)</p>', page, re.S)[1]
    assert said.startswith("Consent status Accepted since ") and said.endswith(" or earlier"), said  # not "by <time>"


def test_status_values_read_in_the_pages_language(signed_in, sandbox):
    flow_id = sandbox.create()["flowId"]
    sandbox.control(flow_id, "accept")
    client = signed_in("viewer")
    for language, accepted in {"nb": "Akseptert", "sv": "Accepterat", "fi": "Hyväksytty"}.items():
        client.post("/language", data={"language": language})
        listing = client.get("/flows").text
        assert f'status-badge tone-success">{accepted}</span>' in listing, language
        assert ">Accepted<" not in client.get(f"/flows/{flow_id}").text, language


def test_a_bad_filter_on_the_refused_deliveries_page_keeps_the_page(signed_in):
    client = signed_in("admin")
    client.post("/webhooks/flow", data=b"{}", headers={"content-type": "application/json"})
    answer = client.get("/admin/rejected?kind=junk")
    assert answer.status_code == 400 and "Not a valid choice" in answer.text
    assert "Signature header missing" in answer.text, "the summary names each reason in words"


def test_the_header_names_the_role_in_the_pages_language(signed_in):
    client = signed_in("operator")
    client.post("/language", data={"language": "fi"})
    assert "operator-user · käsittelijä" in client.get("/flows").text


def test_the_consent_time_is_when_the_status_began_not_when_it_was_read(app, signed_in, sandbox):
    flow_id = sandbox.create()["flowId"]
    created_at = sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["createdAt"]
    client = signed_in("viewer")
    client.get("/flows")
    assert app.extensions["flow_index"].flush(10)
    page = client.get(f"/flows/{flow_id}").text
    with app.test_request_context():
        began = local_time(parse_timestamp(created_at), seconds=True)
    assert f"Consent status Unopened since {began}" in page


def test_a_completed_flow_last_seen_unopened_shows_the_answer_the_list_gives(app, signed_in, sandbox):
    """The page said the person had answered but the portal had not seen how, and went on showing "Unopened" until
    someone found Refresh (found by a new user): it now asks the service's list itself, which alone says it."""
    flow_id = sandbox.create()["flowId"]
    client = signed_in("viewer")
    client.get("/flows")  # the list says Unopened
    assert app.extensions["flow_index"].flush(10)
    sandbox.control(flow_id, "reject")  # no webhook tells the portal
    page = html.unescape(client.get(f"/flows/{flow_id}").text)
    assert "the portal has not yet seen" not in page
    assert 'data-consent="Rejected"' in page and "(the flow list, just now)" in page, "the list's word, said so"
    again = html.unescape(client.get(f"/flows/{flow_id}").text)
    assert 'data-consent="Rejected"' in again, "kept in the index"


def test_a_completed_flow_the_list_does_not_show_says_the_answer_is_not_seen_yet(make_app, alt):
    app = make_app(sandbox_url=alt.url, **ALT_SETTINGS, WTF_CSRF_ENABLED=False)
    client = app.test_client()
    sign_in(client, add_user(app, "vera", "viewer"))
    flow = alt.find(alt.current_ids()[0])
    client.get("/flows")  # the list says Unopened
    assert app.extensions["flow_index"].flush(10)
    flow.status = "Accepted"
    alt.set(items="empty")  # and now shows no flow by its id
    asked = alt.counts["list"]
    page = client.get(f"/flows/{flow.id}").text
    assert "the individual has answered, but the portal has not yet seen" in page
    assert 'data-testid="consent-time"' not in page
    assert alt.counts["list"] > asked, "the page asked the list"
    asked = alt.counts["list"]
    assert "has not yet seen" in client.get(f"/flows/{flow.id}").text
    assert alt.counts["list"] == asked, "not again at every view (a re-check)"
    clock = app.extensions["portal.clock"]
    app.extensions["portal.clock"] = lambda: clock() + 301
    client.get(f"/flows/{flow.id}")
    assert alt.counts["list"] > asked, "again after a while"


def test_a_failed_create_says_why_in_the_pages_language(make_app):
    app = make_app(sandbox_url="http://127.0.0.1:9", WTF_CSRF_ENABLED=False, FLOW_RETRY_BUDGET="0")
    add_user(app, "kari", "operator", language="nb")
    client = app.test_client()
    sign_in(client, "kari")
    answer = client.post("/flows/new", data={**TYPED, "submission": new_form_token(client)})
    assert "Flyten ble ikke opprettet" in answer.text
    assert "The Flow Service" not in answer.text and "The identity provider" not in answer.text


def test_the_built_in_reveal_purposes_read_in_the_pages_language(signed_in, sandbox):
    flow_id = sandbox.create()["flowId"]
    client = signed_in("operator")
    client.post("/language", data={"language": "fi"})
    page = client.get(f"/flows/{flow_id}").text
    assert '<option value="Customer contact">Asiakasyhteydenotto</option>' in page, "the log keeps the English value"


def test_an_event_type_breaks_after_its_dots_and_stays_escaped(app, signed_in):
    client = signed_in("viewer")
    post_event = {"id": "esc-1", "type": "flow.<b>bold</b>.changed", "data": {"referenceId": "LA-1"}}
    assert deliver_signed(app, post_event).status_code == 200
    page = client.get("/events").text
    assert "<code>flow.<wbr>&lt;b&gt;bold&lt;/b&gt;.<wbr>changed</code>" in page


def test_the_sandbox_consent_link_is_not_offered_on_an_archived_or_cancelled_flow(app, signed_in, sandbox):
    """The README offers it only while consent is pending: an archived flow still Unopened and active offered it."""
    client = signed_in("viewer")
    pending = sandbox.create()["flowId"]
    archived = sandbox.create()["flowId"]
    assert sandbox.control(archived, "archive").status_code == 200
    cancelled = sandbox.create()["flowId"]
    assert sandbox.control(cancelled, "cancel").status_code == 200
    client.get("/flows")
    client.get("/flows?archived=true")  # the archived tab tells which flows are archived
    assert app.extensions["flow_index"].flush(10), "the index writer did not finish"
    assert "Open the sandbox consent page" in client.get(f"/flows/{pending}").text
    for flow_id in (archived, cancelled):
        page = client.get(f"/flows/{flow_id}").text
        assert 'data-archived="yes"' in page, "the page knows the flow is archived"
        assert "Open the sandbox consent page" not in page
