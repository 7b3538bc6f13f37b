"""The client-credentials token provider against a switchable stand-in identity provider, over real HTTP."""

import threading
import time

import pytest
from flask import Flask, jsonify
from prometheus_client import REGISTRY
from support import Clock, migrated, portal_config, run_in_threads

from portal import create_app
from portal.flowapi import (
    FlowApiError,
    InsufficientScope,
    RateLimited,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    build_client,
)
from portal.flowapi.errors import TokenRequestRefused
from portal.flowapi.tokens import FAILURE_MEMORY, MAX_LIFETIME, ClientCredentialsProvider
from portal.settings import load_settings

FRESH = object()  # stands for a new access token, numbered by the stand-in


def ok(**fields) -> tuple:
    return 200, {"access_token": FRESH, "token_type": "Bearer", "expires_in": 300} | fields, {}


def oauth_error(status: int, error: str, description: str = "", headers: dict | None = None) -> tuple:
    body = {"error": error} | ({"error_description": description} if description else {})
    return status, body, headers or {}


class StandInIdentityProvider:
    """A token endpoint whose answers the test queues (the last one repeats); it counts requests.

    `hang` holds each token request until the test ends (or for that many seconds); the fixture
    releases them at teardown, so no server thread is left waiting.
    """

    def __init__(self, serve):
        self.answers: list[tuple] = [ok()]
        self.hang = 0.0
        self.requests = 0
        self.released = threading.Event()
        self._lock = threading.Lock()
        app = Flask("stand-in-identity-provider")
        app.add_url_rule("/token", view_func=self._token, methods=["POST"])
        app.add_url_rule("/api/flows", view_func=lambda: jsonify({"data": [], "has_more": False}))
        self.base_url = serve(app)
        self.url = self.base_url + "/token"

    def _token(self):
        with self._lock:
            self.requests += 1
            number = self.requests
            status, body, headers = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if self.hang:
            self.released.wait(self.hang)
        if isinstance(body, dict) and body.get("access_token") is FRESH:
            body = body | {"access_token": f"token-{number}"}
        answer = jsonify(body) if isinstance(body, dict) else body
        return answer, status, headers


@pytest.fixture
def idp(serve):
    stand_in = StandInIdentityProvider(serve)
    yield stand_in
    stand_in.released.set()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_provider(idp, clock):
    """`make_provider(leeway=5)`: a provider on the stand-in with the test's clock and quick settings."""

    def build(**overrides) -> ClientCredentialsProvider:
        settings = {
            "token_url": idp.url,
            "client_id": "portal",
            "client_secret": "portal-secret",
            "scopes": ("loan-application:create:no",),
            "auth_method": "client_secret_post",
            "leeway": 30,
            "timeout": (1.0, 1.0),
            "retries": 2,
            "retry_budget": 3.0,
            "clock": clock,
            "sleep": clock.sleep,
        }
        return ClientCredentialsProvider(**(settings | overrides))

    return build


def client_settings(idp, **overrides):
    quick = {
        "FLOW_TOKEN_URL": idp.url,
        "FLOW_READ_TIMEOUT": "1",
        "FLOW_CONNECT_TIMEOUT": "1",
        "FLOW_RETRY_BUDGET": "1",
    }
    return load_settings(portal_config(idp.base_url, "sqlite://", **(quick | overrides)), testing=True)


# -- a hanging or failing identity provider ------------------------------------------------------


def test_sixteen_page_loads_on_a_hanging_identity_provider_fail_together_within_the_bound(idp):
    settings = client_settings(idp)
    client = build_client(settings)
    idp.hang = 60.0
    answered_after, errors = [], []

    def page_load():
        started = time.monotonic()
        try:
            client.list_flows()
        except FlowApiError as error:
            errors.append(error)
        answered_after.append(time.monotonic() - started)

    assert run_in_threads(page_load, 16) == []
    assert len(errors) == 16 and all(isinstance(error, UpstreamTimeout) for error in errors)
    assert {error.code for error in errors} == {"token_timeout"}
    assert not any(error.reached_api for error in errors), "nothing reached the Flow API"
    assert max(answered_after) <= settings.read_timeout + settings.retry_budget + 1
    assert idp.requests == 1, "a read timeout is not repeated, neither by the fetch nor by the waiting threads"


def test_a_failed_fetch_is_remembered_briefly_then_tried_again(idp, make_provider, clock):
    idp.answers = [oauth_error(503, "temporarily_unavailable", "Maintenance"), ok()]
    provider = make_provider(retries=0)
    with pytest.raises(UpstreamUnavailable) as first:
        provider.token()
    with pytest.raises(UpstreamUnavailable) as second:
        provider.token()
    assert idp.requests == 1
    assert second.value is not first.value and str(second.value) == str(first.value)
    assert second.value.code == "temporarily_unavailable"
    clock.now += FAILURE_MEMORY + 0.01
    assert provider.token() == "token-2"
    assert idp.requests == 2


def test_one_503_is_retried(idp, make_provider, clock):
    idp.answers = [(503, "<html>Service Unavailable</html>", {}), ok()]
    assert make_provider().token() == "token-2"
    assert idp.requests == 2 and len(clock.slept) == 1
    assert 0.1 <= clock.slept[0] <= 0.2, "the first back-off: the upper half of a fifth of a second"


def test_a_503_through_the_client_is_retried_within_the_api_retry_budget(idp):
    idp.answers = [(503, "", {}), ok()]
    assert build_client(client_settings(idp)).list_flows().items == []
    assert idp.requests == 2


@pytest.mark.parametrize("status", [429, 503])
def test_a_refusal_is_retried_after_the_delay_it_asks_for(idp, make_provider, clock, status):
    idp.answers = [oauth_error(status, "slow_down", headers={"Retry-After": "1"}), ok()]
    assert make_provider().token() == "token-2"
    assert clock.slept == [1.0] and idp.requests == 2


def test_an_unreadable_retry_after_falls_back_to_the_short_backoff(idp, make_provider, clock):
    idp.answers = [(429, "", {"Retry-After": "²"}), ok()]
    assert make_provider().token() == "token-2"
    assert len(clock.slept) == 1 and 0.1 <= clock.slept[0] <= 0.2


def test_429_beyond_the_budget_is_rate_limited_with_the_description_at_once(idp, make_provider, clock):
    idp.answers = [oauth_error(429, "slow_down", "Too many token requests", {"Retry-After": "60"})]
    with pytest.raises(RateLimited) as raised:
        make_provider().token()
    assert "Too many token requests" in str(raised.value)
    assert raised.value.retry_after == 60 and raised.value.code == "slow_down" and raised.value.status == 429
    assert idp.requests == 1 and clock.slept == []


def test_without_a_retry_budget_the_error_is_raised_at_once(idp, make_provider, clock):
    idp.answers = [(503, "", {}), ok()]
    with pytest.raises(UpstreamUnavailable) as raised:
        make_provider(retry_budget=0).token()
    assert raised.value.code == "token_unavailable" and raised.value.status == 503
    assert idp.requests == 1 and clock.slept == []


def test_retries_stop_at_the_retry_count(idp, make_provider, clock):
    idp.answers = [(502, "", {})]
    with pytest.raises(UpstreamUnavailable):
        make_provider(retries=2, retry_budget=30).token()
    assert idp.requests == 3 and len(clock.slept) == 2


def test_an_unreachable_identity_provider_is_retried_then_typed(make_provider, clock):
    with pytest.raises(UpstreamUnavailable) as raised:
        make_provider(token_url="http://127.0.0.1:9/token").token()
    assert raised.value.code == "token_unreachable" and len(clock.slept) == 2
    assert str(raised.value) == "Cannot connect to the identity provider (ConnectionError)"


def test_an_identity_provider_without_tls_at_an_https_address_is_a_tls_failure_not_retried(idp, make_provider, clock):
    with pytest.raises(UpstreamUnavailable) as raised:
        make_provider(token_url=idp.url.replace("http://", "https://")).token()
    assert (raised.value.code, str(raised.value)) == (
        "tls",
        "The identity provider's TLS certificate cannot be verified",
    )
    assert clock.slept == [] and idp.requests == 0


def test_each_token_request_is_counted_by_its_outcome(idp, make_provider):
    def fetches(outcome: str) -> float:
        return REGISTRY.get_sample_value("portal_token_fetches_total", {"outcome": outcome}) or 0.0

    before = fetches("ok"), fetches("http_4xx")
    idp.answers = [oauth_error(401, "invalid_client"), ok()]
    with pytest.raises(Unauthorized):
        make_provider().token()
    assert make_provider().token() == "token-2"
    assert (fetches("ok"), fetches("http_4xx")) == (before[0] + 1, before[1] + 1)


# -- lifetimes -----------------------------------------------------------------------------------


def test_the_leeway_is_capped_at_half_the_lifetime(idp, make_provider, clock):
    idp.answers = [ok(expires_in=5)]
    provider = make_provider(leeway=30)
    assert provider.token() == provider.token() == "token-1"
    clock.now += 2.4
    assert provider.token() == "token-1" and idp.requests == 1
    clock.now += 0.2  # past half the lifetime
    assert provider.token() == "token-2" and idp.requests == 2


def test_a_long_lifetime_keeps_the_configured_leeway(idp, make_provider, clock):
    provider = make_provider(leeway=30)
    provider.token()
    clock.now += 300 - 30 - 0.1
    assert provider.token() == "token-1"
    clock.now += 0.2
    assert provider.token() == "token-2"


def test_a_token_is_renewed_at_its_renewal_moment_itself(idp, make_provider, clock):
    provider = make_provider(leeway=30)
    provider.token()
    clock.now += 300 - 30  # the moment renewal is due (the clock's values are whole: no rounding)
    assert provider.token() == "token-2" and idp.requests == 2


def test_expires_in_as_a_string_of_digits_is_read(idp, make_provider, clock):
    idp.answers = [ok(expires_in="300")]
    provider = make_provider()
    assert provider.token() == "token-1" and provider.describe()["lifetime"] == 300
    clock.now += 269.9
    assert provider.token() == "token-1" and idp.requests == 1


def test_expires_in_with_a_fraction_is_read(idp, make_provider, clock):
    idp.answers = [ok(expires_in=299.5)]
    provider = make_provider()
    assert provider.token() == "token-1" and provider.describe()["lifetime"] == 299.5


@pytest.mark.parametrize(("scope", "described"), [("flows:read flows:write", "flows:read flows:write"), (7, "")])
def test_the_granted_scopes_are_described_as_the_provider_said_them(idp, make_provider, scope, described):
    idp.answers = [ok(scope=scope)]
    assert make_provider().describe() == {"lifetime": 300, "scopes": described}


def test_a_token_answer_without_scope_describes_none(idp, make_provider):
    assert make_provider().describe() == {"lifetime": 300, "scopes": ""}


def test_a_token_without_expires_in_is_kept_until_the_api_refuses_it(idp, make_provider, clock):
    # RFC 6749 §5.1 only recommends expires_in; the transport invalidates the token on a 401.
    idp.answers = [(200, {"access_token": FRESH, "token_type": "Bearer"}, {})]
    provider = make_provider()
    token = provider.token()
    clock.now += 86400
    assert provider.token() == token and idp.requests == 1
    provider.invalidate(token)
    assert provider.token() == "token-2"


@pytest.mark.parametrize("expires_in", ["5m", "²", "", 0, -5, True, float("inf"), {"seconds": 300}, [300]])
def test_a_token_with_an_unreadable_expires_in_is_used_until_the_api_refuses_it(
    idp, make_provider, clock, caplog, expires_in
):
    """Refused, it stopped every page, though the API may well take the token (a stand-in): it is used as a token
    without a lifetime is, and the log says why it has none."""
    idp.answers = [ok(expires_in=expires_in)]
    provider = make_provider()
    token = provider.token()
    assert token == "token-1" and provider.describe()["lifetime"] is None
    assert "expires_in" in caplog.text and "not a positive number of seconds" in caplog.text
    clock.now += 86400
    assert provider.token() == token and idp.requests == 1
    provider.invalidate(token)
    assert provider.token() == "token-2"


@pytest.mark.parametrize(
    ("expires_in", "shown"),
    [({"seconds": 300}, "(an object)"), ([300], "(a list)"), ("5" * 50, "'" + "5" * 39)],  # a value: its first 40
)
def test_an_expires_in_that_is_no_value_is_named_by_its_kind(idp, make_provider, caplog, expires_in, shown):
    idp.answers = [ok(expires_in=expires_in)]
    make_provider().token()
    assert f"expires_in {shown} is not a positive number of seconds" in caplog.text


@pytest.mark.parametrize("expires_in", [2147483647, "2147483647", 1e12])
def test_a_lifetime_of_more_than_ten_years_is_read_as_ten(idp, make_provider, clock, caplog, expires_in):
    """2147483647 is how some identity providers say "never": refused, it stopped every page (a stand-in)."""
    idp.answers = [ok(expires_in=expires_in)]
    provider = make_provider(leeway=30)
    assert provider.token() == "token-1" and provider.describe()["lifetime"] == MAX_LIFETIME
    assert "over ten years" in caplog.text
    clock.now += MAX_LIFETIME - 31
    assert provider.token() == "token-1"
    clock.now += 2
    assert provider.token() == "token-2"


# -- answers that are not a token ----------------------------------------------------------------


CREDENTIALS_REFUSED = "The identity provider refused the client id or secret (FLOW_CLIENT_ID / FLOW_CLIENT_SECRET)"


@pytest.mark.parametrize(
    ("status", "error", "kind", "message"),
    [
        (401, "invalid_client", Unauthorized, CREDENTIALS_REFUSED),
        (400, "invalid_client", Unauthorized, CREDENTIALS_REFUSED),
        (401, "unauthorized_client", Unauthorized, CREDENTIALS_REFUSED),
        (400, "invalid_scope", InsufficientScope, "The identity provider refused the requested scopes (FLOW_SCOPES)"),
        (400, "invalid_request", TokenRequestRefused, "The identity provider refused the token request as malformed"),
        (
            400,
            "unsupported_grant_type",
            TokenRequestRefused,
            "The identity provider does not allow the client credentials grant for this client",
        ),
        (400, "invalid_grant", TokenRequestRefused, "The identity provider refused the grant"),
        (400, "invalid_target", TokenRequestRefused, "The identity provider refused the token request"),
    ],
)
def test_oauth_errors_are_typed_and_keep_the_description(idp, make_provider, status, error, kind, message):
    idp.answers = [oauth_error(status, error, "Missing form parameter: grant_type")]
    with pytest.raises(kind) as raised:
        make_provider().token()
    assert type(raised.value) is kind
    assert raised.value.code == error and raised.value.status == status
    code = f" ({error})" if kind is TokenRequestRefused else ""  # which refusal: the code says, the words cannot
    assert str(raised.value) == f"{message}{code}: Missing form parameter: grant_type"
    assert raised.value.reason == "Missing form parameter: grant_type"
    assert idp.requests == 1, "a refusal is not retried"


def test_invalid_request_says_the_request_was_refused_not_the_credentials(idp, make_provider):
    idp.answers = [oauth_error(400, "invalid_request", "Invalid client_secret_post")]
    with pytest.raises(FlowApiError) as raised:
        make_provider().token()
    assert not isinstance(raised.value, Unauthorized)
    assert "refused the token request as malformed" in str(raised.value)
    assert "credentials" not in str(raised.value).lower()


def test_the_description_is_cleaned_before_it_is_shown(idp, make_provider):
    description = "Client\x00 for 15108695088 \u202e\nrefused " + "x" * 1000
    idp.answers = [oauth_error(400, "invalid_request", description)]
    with pytest.raises(TokenRequestRefused) as raised:
        make_provider().token()
    message = str(raised.value)
    assert "15108695088" not in message and "\x00" not in message and "\n" not in message
    assert "\u202e" not in message and "Client for" in message
    assert len(raised.value.reason) <= 200


def test_an_unsafe_error_code_is_not_echoed(idp, make_provider):
    idp.answers = [oauth_error(400, "bad code\r\nX-Injected: 1", "nope")]
    with pytest.raises(TokenRequestRefused) as raised:
        make_provider().token()
    assert raised.value.code == "token_error"


@pytest.mark.parametrize(
    ("answer", "code", "words"),
    [
        (  # authlib converts expires_at with int() itself, after the portal's checks
            (200, {"access_token": "t", "expires_in": 300, "expires_at": [1]}, {}),
            "token_malformed",
            "The identity provider's token answer cannot be read",
        ),
        ((200, "<html>Welcome</html>", {}), "token_malformed", "not a JSON object"),
        ((200, {"token_type": "Bearer", "expires_in": 300}, {}), "token_malformed", "access_token"),
        ((200, {"access_token": "two words", "expires_in": 300}, {}), "token_malformed", "access_token"),
        ((200, "[1, 2]", {"Content-Type": "application/json"}), "token_malformed", "not a JSON object"),
        ((404, "<html>Not Found</html>", {}), "token_not_found", "FLOW_TOKEN_URL"),
        ((400, {"message": "bad"}, {}), "token_malformed", "without an OAuth error"),
    ],
)
def test_answers_without_a_token_are_protocol_errors(idp, make_provider, answer, code, words):
    idp.answers = [answer]
    with pytest.raises(UpstreamProtocolError) as raised:
        make_provider().token()
    assert raised.value.code == code and words in str(raised.value)


def test_a_401_without_an_oauth_answer_is_a_refusal_of_the_credentials(idp, make_provider):
    """An identity provider's 401 as an HTML page read "sent something unexpected", not that the client id or
    secret was refused (a stand-in)."""
    idp.answers = [(401, "<html>Unauthorized</html>", {})]
    with pytest.raises(Unauthorized) as raised:
        make_provider().token()
    assert raised.value.code == "token_unauthorized" and "FLOW_CLIENT_SECRET" in str(raised.value)


@pytest.mark.parametrize(("token_type", "logged"), [("mac", "'mac'"), (7, "7"), ("bearer", None), ("BEARER", None)])
def test_a_token_type_other_than_bearer_is_used_and_logged(idp, make_provider, caplog, token_type, logged):
    """The spec's only type is Bearer: a "mac" token was sent as a Bearer token without a word (a stand-in)."""
    idp.answers = [ok(token_type=token_type)]
    assert make_provider().token() == "token-1"
    warned = [record.getMessage() for record in caplog.records if "token_type" in record.getMessage()]
    assert warned == (
        [] if logged is None else [f"flowapi: the identity provider's token_type {logged} is not Bearer: sent as one"]
    )


def test_check_names_a_refused_token_request_in_one_line(idp, sqlite_url):
    idp.answers = [oauth_error(400, "invalid_request", "Missing form parameter: grant_type")]
    app = migrated(create_app(portal_config(idp.base_url, sqlite_url, FLOW_TOKEN_URL=idp.url)))
    result = app.test_cli_runner().invoke(args=["check"])
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1
    assert "invalid_request" in result.output and "Missing form parameter: grant_type" in result.output
    assert "401 from the API" not in result.output
