"""The Flow API client against the sandbox over real HTTP: both auth modes, renewal, faults, hygiene."""

import logging
import time
from dataclasses import replace

import pytest
import requests
import responses
from support import Clock, jwt_settings, portal_config, run_in_threads, wait_until

from portal.flowapi import (
    FlowClient,
    InsufficientScope,
    NotFound,
    RateLimited,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    ValidationFailed,
    build_client,
)
from portal.flowapi.client import Clock as ClientClock
from portal.flowapi.client import build_provider
from portal.flowapi.records import FlowDetail, FlowPage, FlowSummary
from portal.flowapi.transport import Transport
from portal.settings import load_settings


def make_client(sandbox_url, clock: Clock | None = None, **overrides) -> FlowClient:
    """A client of the sandbox; with `clock`, token renewal, retry budget and backoff waits run on it."""
    quick = {"FLOW_READ_TIMEOUT": "1", "FLOW_CONNECT_TIMEOUT": "1", "FLOW_RETRY_BUDGET": "3"}
    config = portal_config(sandbox_url, "sqlite://", **(quick | overrides))
    settings = load_settings(config, testing=True)
    return build_client(settings, ClientClock(clock, clock.sleep)) if clock else build_client(settings)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def clocked_client(sandbox, clock) -> FlowClient:
    return make_client(sandbox.url, clock)


@pytest.fixture
def flow_client(sandbox) -> FlowClient:
    """A client whose timeouts only a stuck sandbox reaches: a loaded machine must not fail tests not about time."""
    return make_client(sandbox.url, FLOW_READ_TIMEOUT="10", FLOW_CONNECT_TIMEOUT="10")


@pytest.fixture
def quick_client(sandbox) -> FlowClient:
    """A client that gives up after 1 s, for the tests of what a timeout does."""
    return make_client(sandbox.url)


@pytest.fixture
def jwt_client(make_sandbox, trusted_keys_file, client_key):
    sandbox = make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted_keys_file))
    client = make_client(sandbox.url, **jwt_settings(client_key))
    return sandbox, client


def test_client_credentials_end_to_end(sandbox, flow_client):
    created = flow_client.create_flow(
        "15108695088", "Nordmann", "https://lender.example/done", "https://lender.example/hooks"
    )
    assert created.reference_id.startswith("LA-")
    page = flow_client.list_flows()
    assert isinstance(page, FlowPage) and page.has_more is False
    assert [item.id for item in page.items] == [created.flow_id]
    assert page.items[0].status == "Unopened" and page.items[0].created_at is not None
    detail = flow_client.get_flow(created.flow_id)
    assert isinstance(detail, FlowDetail)
    assert detail.flow_id == created.flow_id and detail.status == "active" and detail.version == 1
    assert detail.data.national_id == "15108695088" and detail.data.webhook_url == "https://lender.example/hooks"
    assert detail.data.redirect_url == "https://lender.example/done" and detail.num_attachments == 0
    assert detail.reference_id == created.reference_id and detail.actions == ["read", "assign", "cancel"]
    assert detail.raw["flow"]["flowId"] == created.flow_id


def test_a_list_without_a_size_asks_for_ten(make_sandbox):
    sandbox = make_sandbox(SANDBOX_SEED="30")
    page = make_client(sandbox.url).list_flows()
    assert len(page.items) == 10 and page.has_more is True


def test_self_signed_jwt_end_to_end(jwt_client):
    sandbox, client = jwt_client
    created = client.create_flow("131052-308T", "Virtanen", "https://lender.example/done")
    assert client.get_flow(created.flow_id).data.last_name == "Virtanen"
    for _ in range(3):
        assert client.list_flows().items[0].id == created.flow_id
    assert sandbox.stats()["token_requests"] == 0, "a self-signed JWT needs no token endpoint"
    # What `flask check` reports: the JWT's own lifetime; the scopes are the sandbox's to grant, not the JWT's.
    assert client.provider.describe() == {"lifetime": 60, "scopes": "(registered with the key by the operator)"}


def test_paging_with_cursors(make_sandbox):
    sandbox = make_sandbox(SANDBOX_SEED="25")
    client = make_client(sandbox.url)
    first = client.list_flows(limit=4)
    second = client.list_flows(limit=4, starting_after=first.last_id)
    back = client.list_flows(limit=4, ending_before=second.first_id)
    assert [item.id for item in back.items] == [item.id for item in first.items]
    archived = client.list_flows(limit=100, archived=True)
    assert archived.items and all(item.id not in {i.id for i in first.items} for item in archived.items)


def test_one_token_serves_many_calls(sandbox, flow_client):
    for _ in range(25):
        flow_client.list_flows(limit=1)
    assert sandbox.stats()["token_requests"] == 1


def test_sixteen_threads_on_a_cold_cache_fetch_one_token(sandbox, flow_client):
    assert run_in_threads(lambda: flow_client.list_flows(limit=1), 16) == []
    assert sandbox.stats()["token_requests"] == 1


def test_a_revoked_token_is_renewed_transparently(sandbox, flow_client):
    flow_client.list_flows()
    sandbox.fault(mode="expire_tokens")
    flow_client.list_flows()
    flow_client.create_flow("15108695088", "Nordmann", "https://lender.example/done")
    assert sandbox.stats()["token_requests"] == 2
    assert sandbox.stats()["flows_created"] == 1


def test_tokens_are_renewed_before_expiry(sandbox, clock):
    client = make_client(sandbox.url, clock, FLOW_TOKEN_LEEWAY="30")  # the sandbox's tokens live 300 s
    client.list_flows()
    clock.now += 300 - 30 - 0.5
    client.list_flows()
    assert sandbox.stats()["token_requests"] == 1
    clock.now += 1  # inside the leeway before expiry
    client.list_flows()
    assert sandbox.stats()["token_requests"] == 2


def test_early_expiring_tokens_are_renewed_on_401(sandbox, flow_client):
    """The service ends a token before the lifetime it announced: the 401 makes the client fetch another."""
    service_clock = Clock(time.time())
    sandbox.app.extensions["flow_sandbox"].identity.clock = service_clock
    sandbox.fault(mode="expire_tokens", lifetime=1)
    service_clock.now += 0.5  # tokens from here on are not the revoked ones, but die after a second
    flow_client.list_flows()
    service_clock.now += 5
    flow_client.list_flows()
    assert sandbox.stats()["token_requests"] == 2


def test_a_401_that_persists_surfaces_after_one_renewal(client_key, make_sandbox):
    other = make_sandbox()  # trusts no client key
    client = make_client(other.url, **jwt_settings(client_key))
    with pytest.raises(Unauthorized) as raised:
        client.list_flows()
    assert raised.value.status == 401 and raised.value.code == "unauthorized"


@pytest.mark.parametrize(
    ("overrides", "error", "code"),
    [
        ({"FLOW_CLIENT_ID": "nobody"}, Unauthorized, "invalid_client"),
        ({"FLOW_CLIENT_SECRET": "wrong"}, Unauthorized, "unauthorized_client"),
        ({"FLOW_SCOPES": "loan-application:create:dk"}, InsufficientScope, "invalid_scope"),
    ],
)
def test_token_errors_are_typed(sandbox, overrides, error, code):
    with pytest.raises(error) as raised:
        make_client(sandbox.url, **overrides).list_flows()
    assert raised.value.code == code


def test_api_errors_are_typed(sandbox, flow_client):
    with pytest.raises(NotFound):
        flow_client.get_flow("00000000-0000-4000-8000-000000000000")
    with pytest.raises(ValidationFailed) as raised:
        flow_client.create_flow("15108695089", "", "/relative")
    assert {detail.field for detail in raised.value.details} == {"nationalId", "lastName", "redirectUrl"}
    with pytest.raises(ValidationFailed):
        flow_client.list_flows(starting_after="missing")
    narrow = make_client(sandbox.url, FLOW_SCOPES="loan-application:create:se")
    with pytest.raises(InsufficientScope):
        narrow.create_flow("15108695088", "Nordmann", "https://lender.example/done")


@pytest.mark.parametrize("flow_id", ["../flows", "x/../../flows"])
def test_a_flow_id_stays_one_segment_of_the_path(sandbox, flow_client, flow_id):
    flow_client.create_flow("15108695088", "Nordmann", "https://lender.example/done")
    with pytest.raises(NotFound):  # not the flow list at /api/flows, read as a flow
        flow_client.get_flow(flow_id)


def test_get_is_retried_through_transient_5xx(sandbox, flow_client):
    flow_client.list_flows()
    sandbox.fault(mode="error", status=503, count=2)
    assert flow_client.list_flows().has_more is False


def test_persistent_5xx_is_upstream_unavailable_within_the_budget(sandbox, clocked_client, clock):
    clocked_client.list_flows()
    sandbox.fault(mode="error", status=502)
    with pytest.raises(UpstreamUnavailable) as raised:
        clocked_client.list_flows()
    assert raised.value.status == 502 and raised.value.request_id
    assert len(clock.slept) == 2, "FLOW_RETRIES (2) retries, then the error"
    first, second = clock.slept
    assert 0.1 <= first <= 0.2 and 0.2 <= second <= 0.4, "the back-off doubles"
    assert sum(clock.slept) <= 3, "the waits fit in FLOW_RETRY_BUDGET"


def test_429_honours_retry_after(sandbox, clocked_client, clock):
    clocked_client.list_flows()
    sandbox.fault(mode="rate_limit", retry_after=1, count=1)
    clocked_client.list_flows()
    assert clock.slept == [1.0]


def test_a_wait_that_ends_just_at_the_budget_is_still_waited(sandbox, clocked_client, clock):
    clocked_client.list_flows()
    sandbox.fault(mode="rate_limit", retry_after=3, count=1)  # FLOW_RETRY_BUDGET is 3 s
    clocked_client.list_flows()
    assert clock.slept == [3.0]


def test_429_beyond_the_budget_surfaces_as_rate_limited(sandbox, clocked_client, clock):
    clocked_client.list_flows()
    sandbox.fault(mode="rate_limit", retry_after=60)
    with pytest.raises(RateLimited) as raised:
        clocked_client.list_flows()
    assert raised.value.retry_after == 60
    assert clock.slept == [], "a wait past the budget is not waited: the error comes at once"


def test_timeout_is_upstream_timeout_within_the_read_timeout(sandbox, quick_client):
    """The service holds the answer 5 s; the read timeout (1 s) ends the wait: an error rather than late data."""
    quick_client.list_flows()
    sandbox.fault(mode="timeout", seconds=5, count=1)
    with pytest.raises(UpstreamTimeout) as raised:
        quick_client.list_flows()
    assert (raised.value.code, str(raised.value)) == ("read_timeout", "The Flow Service did not answer in time")
    assert raised.value.request_id, "the support code names the request, as for any answer"


def test_a_post_is_not_repeated_after_a_timeout(sandbox, quick_client):
    quick_client.list_flows()
    sandbox.fault(mode="timeout", seconds=1.5)
    with pytest.raises(UpstreamTimeout):
        quick_client.create_flow("15108695088", "Nordmann", "https://lender.example/done")
    # The client has given up; the sandbox finishes the held request on its own.
    wait_until(lambda: sandbox.stats()["flows_created"] >= 1, "the held create to finish")
    requests.delete(f"{sandbox.url}/sandbox/faults", timeout=5)
    assert sandbox.stats()["flows_created"] == 1, "the held request went through once, and was not sent again"


def test_a_post_is_not_retried_on_503(sandbox, flow_client):
    flow_client.list_flows()
    sandbox.fault(mode="error", status=503, count=1)
    with pytest.raises(UpstreamUnavailable):
        flow_client.create_flow("15108695088", "Nordmann", "https://lender.example/done")
    assert sandbox.stats()["flows_created"] == 0
    assert flow_client.list_flows().items == []


def test_malformed_json_is_a_protocol_error(sandbox, flow_client):
    flow_client.list_flows()
    sandbox.fault(mode="malformed", count=1)
    with pytest.raises(UpstreamProtocolError) as raised:
        flow_client.list_flows()
    assert (raised.value.code, str(raised.value)) == ("malformed_json", "The Flow Service sent a body that is not JSON")


def test_a_service_that_speaks_no_tls_on_an_https_address_is_a_tls_failure(sandbox):
    client = make_client(sandbox.url.replace("http://", "https://"), FLOW_TOKEN_URL=sandbox.token_url)
    with pytest.raises(UpstreamUnavailable) as raised:
        client.list_flows()
    assert (raised.value.code, str(raised.value)) == ("tls", "The Flow Service's TLS certificate cannot be verified")
    assert raised.value.request_id and raised.value.support_code == f"tls · {raised.value.request_id}"


def test_latency_within_the_timeout_is_fine(sandbox, flow_client):
    sandbox.fault(mode="latency", ms=200, count=2)
    assert flow_client.list_flows().items == []


def test_unreachable_service_is_upstream_unavailable(sandbox, caplog):
    caplog.set_level(logging.DEBUG, logger="portal.flowapi")
    client = make_client("http://127.0.0.1:9", FLOW_TOKEN_URL=sandbox.token_url, FLOW_RETRY_BUDGET="0.5")
    with pytest.raises(UpstreamUnavailable) as raised:
        client.list_flows()
    attempts = [record.getMessage() for record in caplog.records if record.msg.startswith("flowapi: %s %s ->")]
    assert attempts and attempts[-1].startswith("flowapi: GET /api/flows -> unreachable in "), "no status: the code"
    assert attempts[-1].endswith(f" ms (request {raised.value.request_id})")
    assert str(raised.value) == "Cannot reach the Flow Service (ConnectionError)", "the kind of failure, in words"
    with pytest.raises(UpstreamUnavailable):
        make_client("http://127.0.0.1:9").list_flows()


@responses.activate
def test_non_json_error_page_from_a_proxy_is_handled():
    # A gateway's HTML 502 cannot be produced by the sandbox; everything else here is real.
    responses.add(
        responses.POST,
        "http://flow.invalid/realms/sandbox/protocol/openid-connect/token",
        json={"access_token": "t", "expires_in": 300, "token_type": "Bearer"},
    )
    responses.add(
        responses.GET,
        "http://flow.invalid/api/flows",
        body="<html>Bad gateway</html>",
        status=502,
        content_type="text/html",
    )
    client = make_client("http://flow.invalid", FLOW_RETRIES="0")
    with pytest.raises(UpstreamUnavailable) as raised:
        client.list_flows()
    assert raised.value.code == "http_502" and raised.value.reason is None, "a proxy's page is no reason"


@responses.activate
def test_a_connect_timeout_says_so_in_words():
    # The sandbox cannot make a connect timeout; a `responses` stand-in raises the one requests raises.
    responses.add(
        responses.POST,
        "http://flow.invalid/realms/sandbox/protocol/openid-connect/token",
        json={"access_token": "t", "expires_in": 300, "token_type": "Bearer"},
    )
    responses.add(responses.GET, "http://flow.invalid/api/flows", body=requests.ConnectTimeout("connect timed out"))
    client = make_client("http://flow.invalid", FLOW_RETRIES="0")
    with pytest.raises(UpstreamTimeout) as raised:
        client.list_flows()
    assert (raised.value.code, str(raised.value)) == ("connect_timeout", "Timed out connecting to the Flow Service")


def test_a_load_balancers_affinity_cookie_is_sent_back(serve):
    """As requests' Session does for any caller: a service behind a sticky load balancer stays on one node."""
    from flask import Flask, jsonify, request

    balancer, cookies_seen = Flask("sticky"), []

    @balancer.post("/realms/sandbox/protocol/openid-connect/token")
    def token():
        return jsonify(access_token="t", expires_in=300, token_type="Bearer")

    @balancer.get("/api/flows")
    def flows():
        cookies_seen.append(dict(request.cookies))
        answer = jsonify(data=[], has_more=False)
        answer.set_cookie("AWSALB", "node-7")
        return answer

    client = make_client(serve(balancer))
    client.list_flows()
    client.list_flows()
    assert cookies_seen == [{}, {"AWSALB": "node-7"}]


def test_every_call_carries_a_request_id(sandbox, flow_client, caplog):
    caplog.set_level(logging.DEBUG, logger="portal.flowapi")
    flow_client.list_flows()
    flow_client.list_flows()
    ids = [record.args[-1] for record in caplog.records if record.msg.startswith("flowapi: %s %s ->")]
    assert len(ids) == 2 and len(set(ids)) == 2


def test_a_retry_is_logged_with_the_support_code_of_what_failed(sandbox, clocked_client, clock, caplog):
    caplog.set_level(logging.WARNING, logger="portal.flowapi")
    sandbox.fault(mode="error", status=503, count=1)
    clocked_client.list_flows()
    retries = [record for record in caplog.records if record.msg.startswith("flowapi: %s %s failed")]
    assert len(retries) == 1 and len(clock.slept) == 1
    method, path, support_code, _delay = retries[0].args
    assert (method, path) == ("GET", "/api/flows") and support_code.startswith("503 · ")


def test_secrets_tokens_and_national_ids_never_reach_the_log(sandbox, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="portal")  # an app built earlier set the portal's own level
    client = make_client(sandbox.url)
    client.create_flow("15108695088", "Nordmann", "https://lender.example/done")
    with pytest.raises(ValidationFailed) as raised:
        client.create_flow("15108695089", "Nordmann", "https://lender.example/done")
    sandbox.fault(mode="expire_tokens")
    client.list_flows()
    token = client.provider.token()
    text = caplog.text + str(raised.value) + " ".join(detail.message for detail in raised.value.details)
    assert "demo-secret" not in text
    assert token not in text
    assert "15108695088" not in text and "15108695089" not in text
    assert "flowapi: GET /api/flows -> 401" in caplog.text, "the log is really captured"


def test_models_tolerate_missing_and_unknown_fields():
    page = FlowPage.from_json({"data": [{"id": "a", "surprise": 1}], "extra": True})
    assert page.has_more is None, "a missing has_more is unknown, not false"
    assert page.items[0].status is None and page.items[0].national_id is None
    detail = FlowDetail.from_json({"flow": {"flowId": "a", "incidents": {"i": {"message": "m"}}, "actions": "x"}})
    assert detail.version is None and detail.incidents[0].id == "i" and detail.actions == []
    assert detail.data.national_id is None and detail.created_at is None
    summary = FlowSummary.from_json({"id": "b", "createdAt": "not a date"})
    assert summary.created_at is None
    assert not FlowPage.from_json({"data": [5]}).items[0].has_details
    for broken in ([], {"data": "x"}):
        with pytest.raises(UpstreamProtocolError):
            FlowPage.from_json(broken)
    empty_items = FlowPage.from_json({"data": [{}, {}], "has_more": True})  # the spec's own example
    assert [item.id for item in empty_items.items] == [None, None] and empty_items.last_id is None
    with pytest.raises(UpstreamProtocolError):
        FlowDetail.from_json({"flow": {}})
    assert FlowDetail.from_json({"flow": {}}, "asked-for").flow_id == "asked-for"


def test_the_environment_is_read_once_for_the_service_address(monkeypatch, tmp_path):
    """Proxy and CA bundle come from the environment at start-up, not at each call (trust_env off)."""
    import requests

    from portal.flowapi.transport import environment_resolved_once

    bundle = tmp_path / "ca.pem"
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(bundle))
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    session = environment_resolved_once(requests.Session(), "https://flows.example")
    assert session.trust_env is False and session.verify == str(bundle)
    assert session.proxies.get("https") == "http://proxy.example:3128"
    monkeypatch.setenv("NO_PROXY", "flows.example")
    direct = environment_resolved_once(requests.Session(), "https://flows.example")
    assert "https" not in direct.proxies, "NO_PROXY names the service: no proxy for it"
    monkeypatch.delenv("REQUESTS_CA_BUNDLE")
    monkeypatch.setenv("CURL_CA_BUNDLE", str(tmp_path / "curl-ca.pem"))
    curl = environment_resolved_once(requests.Session(), "https://flows.example")
    assert curl.verify == str(tmp_path / "curl-ca.pem"), (
        "requests reads CURL_CA_BUNDLE when REQUESTS_CA_BUNDLE is unset"
    )


@pytest.mark.parametrize(
    ("field", "setting"),
    [
        ("jwt_private_key", "FLOW_JWT_PRIVATE_KEY"),
        ("jwt_kid", "FLOW_JWT_KID"),
        ("jwt_issuer", "FLOW_JWT_ISSUER"),
        ("jwt_audience", "FLOW_JWT_AUDIENCE"),
        ("token_url", "FLOW_TOKEN_URL"),
        ("client_id", "FLOW_CLIENT_ID"),
        ("client_secret", "FLOW_CLIENT_SECRET"),
    ],
)
def test_settings_without_what_the_auth_mode_needs_are_refused_by_name(client_key, field, setting):
    """load_settings refuses them first; settings built another way are refused here, naming the setting."""
    mode = jwt_settings(client_key) if field.startswith("jwt_") else {}
    settings = load_settings(portal_config("http://127.0.0.1:9", "sqlite://", **mode), testing=True)
    with pytest.raises(ValueError) as raised:
        build_provider(replace(settings, **{field: None}))
    assert str(raised.value) == f"{setting} is required with this FLOW_AUTH_MODE"


@pytest.fixture
def tls_service_that_fails_after_the_request(tmp_path):
    """An HTTPS service that takes the whole request, then ends the connection with a fatal TLS alert (what a TLS
    terminator does when its backend dies mid-request): the request reached it; its answer never came."""
    import datetime as dt
    import ipaddress
    import os
    import socket
    import ssl
    import threading

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = dt.datetime.now(dt.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    context.maximum_version = ssl.TLSVersion.TLSv1_2  # a plaintext alert record is read as such in TLS 1.2
    listener = socket.create_server(("127.0.0.1", 0))
    received = []
    answers = [b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n", b"\x15\x03\x03\x00\x02\x02\x50"]

    def serve():
        while True:
            try:
                raw, _ = listener.accept()
            except OSError:
                return
            try:
                tls = context.wrap_socket(raw, server_side=True)
            except ssl.SSLError:  # a client that refused the certificate
                raw.close()
                continue
            with tls:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += tls.recv(65536)
                received.append(data.split(b"\r\n", 1)[0])
                # a fatal TLS alert (internal_error), or plain HTTP from a terminator whose backend died
                os.write(tls.fileno(), answers[len(received) % len(answers)])

    threading.Thread(target=serve, daemon=True).start()
    yield f"https://127.0.0.1:{listener.getsockname()[1]}", str(cert_file), received
    listener.close()


def test_a_tls_failure_after_the_request_left_may_have_created_the_flow(tls_service_that_fails_after_the_request):
    """It was 'tls', which a create takes for 'never sent, send it again' (found by a re-check)."""
    url, certificate, received = tls_service_that_fails_after_the_request

    class Token:
        def token(self):
            return "t"

        def invalidate(self, token):
            pass

    transport = Transport(url, Token(), connect_timeout=2, read_timeout=2, retries=0, retry_budget=1)
    transport.session.verify = certificate
    for sent in (1, 2):  # an alert, then plain HTTP (OpenSSL: WRONG_VERSION_NUMBER, as for no TLS at all; re-check)
        with pytest.raises(UpstreamUnavailable) as raised:
            transport.post("/api/flows", {"nationalId": "x"})
        assert received == [b"POST /api/flows HTTP/1.1"] * sent, "the request reached the service"
        assert raised.value.code == "connection_lost"
    unverified = Transport(url, Token(), connect_timeout=2, read_timeout=2, retries=0, retry_budget=1)
    with pytest.raises(UpstreamUnavailable) as refused:
        unverified.post("/api/flows", {"nationalId": "x"})
    assert refused.value.code == "tls" and len(received) == 2, "a certificate refused: surely never sent"
