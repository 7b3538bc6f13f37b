"""A sandbox deployed by mistake stays harmless, and a production portal refuses to talk to one."""

import json
import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from support import jwt_settings, portal_config, production_settings

from flow_sandbox import create_app as create_sandbox
from flow_sandbox.safety import bind_refusal
from flow_sandbox.settings import load_sandbox_settings
from portal.flowapi import SandboxInProduction, build_client
from portal.settings import load_settings

REPOSITORY = Path(__file__).resolve().parent.parent
STRANGER = {"REMOTE_ADDR": "203.0.113.5"}
CONTROL_TOKEN = "control-" + secrets.token_urlsafe(24)
REMOTE = {"SANDBOX_ALLOW_REMOTE": "1", "SANDBOX_CONTROL_TOKEN": CONTROL_TOKEN}
DISCOVERY = "/.well-known/openid-configuration"


def as_client(sandbox, environ: dict):
    """A test client of the sandbox app that comes from `environ`'s address."""
    client = sandbox.app.test_client()
    client.environ_base.update(environ)
    return client


def demo_token(client) -> str:
    answer = client.post(
        "/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "demo-client",
            "client_secret": "demo-secret",
            "scope": "loan-application:create:no",
        },
    )
    assert answer.status_code == 200, answer.text
    return answer.json["access_token"]


def create_with_webhook(client, webhook_url: str):
    body = {
        "nationalId": "15108695088",
        "lastName": "Nordmann",
        "redirectUrl": "https://lender.example/done",
        "webhookUrl": webhook_url,
    }
    return client.post("/api/flows", json=body, headers={"Authorization": f"Bearer {demo_token(client)}"})


# -- who may talk to the sandbox -----------------------------------------------------------------


@pytest.mark.parametrize("address", ["203.0.113.5", "10.0.0.7", "::ffff:192.0.2.1", "2001:db8::1", ""])
def test_a_client_off_loopback_is_refused_by_default(sandbox, address):
    for path in (DISCOVERY, "/api/flows", "/sandbox/stats", "/"):
        answer = as_client(sandbox, {"REMOTE_ADDR": address}).get(path)
        assert answer.status_code == 403, path
        assert answer.json["error"] == "forbidden" and "SANDBOX_ALLOW_REMOTE" in answer.json["message"]


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1"])
def test_loopback_clients_are_served(sandbox, address):
    assert as_client(sandbox, {"REMOTE_ADDR": address}).get(DISCOVERY).status_code == 200


@pytest.mark.parametrize("header", ["Forwarded", "X-Forwarded-For", "X-Real-IP"])
def test_a_request_relayed_by_a_local_proxy_is_not_a_loopback_one(sandbox, header):
    answer = requests.get(sandbox.url + DISCOVERY, headers={header: "203.0.113.5"}, timeout=5)
    assert answer.status_code == 403


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:81", "127.0.0.1.nip.example", "[2001:db8::1]"])
def test_a_loopback_client_naming_another_host_is_not_local(sandbox, host):
    """A browser led to 127.0.0.1 by DNS rebinding sends its page's host name: no fault injection, no flow list."""
    for method, path in (("POST", "/sandbox/faults"), ("GET", "/"), ("GET", "/sandbox/stats")):
        answer = requests.request(
            method, sandbox.url + path, headers={"Host": host}, json={"mode": "drop_webhooks"}, timeout=5
        )
        assert answer.status_code == 403, (host, path)
    assert requests.get(sandbox.url + "/sandbox/faults", timeout=5).json()["faults"] == []


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST:8081", "portal.localhost", "127.0.0.1:9", "[::1]:8081"])
def test_loopback_host_names_are_local(sandbox, host):
    assert requests.get(sandbox.url + "/sandbox/stats", headers={"Host": host}, timeout=5).status_code == 200


def test_remote_clients_are_served_when_allowed(make_sandbox):
    stranger = as_client(make_sandbox(**REMOTE), STRANGER)
    assert stranger.get(DISCOVERY).status_code == 200
    token = demo_token(stranger)
    assert stranger.get("/api/flows", headers={"Authorization": f"Bearer {token}"}).status_code == 200


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/sandbox/stats"),
        ("GET", "/sandbox/webhooks"),
        ("GET", "/sandbox/faults"),
        ("POST", "/sandbox/faults"),
        ("DELETE", "/sandbox/faults"),
        ("POST", "/sandbox/flows/any-flow/accept"),
    ],
)
def test_remote_control_needs_the_control_token(make_sandbox, method, path):
    stranger = as_client(make_sandbox(**REMOTE), STRANGER)
    fault = {"json": {"mode": "error", "status": 502, "count": 1}} if path == "/sandbox/faults" else {}
    for credentials in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": CONTROL_TOKEN}):
        refused = stranger.open(path, method=method, headers=credentials, **fault)
        assert refused.status_code == 403, credentials
        assert "SANDBOX_CONTROL_TOKEN" in refused.json["message"]
    allowed = stranger.open(path, method=method, headers={"Authorization": f"Bearer {CONTROL_TOKEN}"}, **fault)
    assert allowed.status_code != 403


def test_remote_fault_injection_with_the_token_takes_effect(make_sandbox):
    sandbox = make_sandbox(**REMOTE)
    stranger = as_client(sandbox, STRANGER)
    control = {"Authorization": f"Bearer {CONTROL_TOKEN}"}
    injected = stranger.post("/sandbox/faults", json={"mode": "error", "status": 503, "count": 1}, headers=control)
    assert injected.status_code == 201
    assert requests.get(f"{sandbox.url}/api/flows", timeout=5).status_code == 503


def test_without_a_control_token_remote_control_is_impossible(make_sandbox):
    stranger = as_client(make_sandbox(SANDBOX_ALLOW_REMOTE="1"), STRANGER)
    assert stranger.get("/sandbox/faults", headers={"Authorization": "Bearer "}).status_code == 403
    assert stranger.get("/sandbox/faults", headers={"Authorization": "Bearer None"}).status_code == 403


def test_loopback_control_needs_no_token(make_sandbox):
    sandbox = make_sandbox(**REMOTE)
    sandbox.fault(mode="error", status=502, count=1)
    assert requests.get(f"{sandbox.url}/sandbox/stats", timeout=5).status_code == 200


def test_the_consent_page_stays_open_to_remote_people_when_allowed(make_sandbox):
    sandbox = make_sandbox(**REMOTE)
    flow_id = sandbox.create()["flowId"]
    assert as_client(sandbox, STRANGER).get(f"/consent/{flow_id}").status_code == 200


def test_the_api_lists_only_the_tokens_organization(make_sandbox, tmp_path):
    clients = tmp_path / "clients.json"
    clients.write_text(json.dumps([{"client_id": "other", "client_secret": "other-secret-0123", "org": "other"}]))
    sandbox = make_sandbox(SANDBOX_CLIENTS=str(clients), **REMOTE)
    sandbox.create()
    other = sandbox.token(client=("other", "other-secret-0123"))
    stranger = as_client(sandbox, STRANGER)
    assert stranger.get("/api/flows", headers={"Authorization": f"Bearer {other}"}).json["data"] == []
    assert stranger.get("/api/flows").status_code == 401


# -- webhooks: no relay to anywhere -------------------------------------------------------------


def test_remote_mode_without_an_allow_list_sends_no_webhooks(make_sandbox):
    stranger = as_client(make_sandbox(**REMOTE), STRANGER)
    refused = create_with_webhook(stranger, "http://169.254.169.254/latest/meta-data")
    assert refused.status_code == 400
    assert refused.json["details"] == [
        {"field": "webhookUrl", "message": "must start with an origin listed in SANDBOX_WEBHOOK_ALLOW"}
    ]


def test_webhooks_go_only_to_allowed_origins(make_sandbox, receiver):
    origin = receiver.url.removesuffix("/hooks")
    sandbox = make_sandbox(SANDBOX_WEBHOOK_ALLOW=f"https://portal.example, {origin}/", **REMOTE)
    stranger = as_client(sandbox, STRANGER)
    outside = (
        "http://169.254.169.254/latest/meta-data",
        origin.replace("127.0.0.1", "localhost") + "/hooks",  # same machine, another name: not listed
        origin.rsplit(":", 1)[0] + ":6379/",  # another port of the listed host
        "https://127.0.0.1" + receiver.url.removeprefix("http://127.0.0.1"),  # another scheme
        f"http://169.254.169.254\\@{origin.removeprefix('http://')}/hooks",  # urlsplit and urllib3 disagree
    )
    for url in outside:
        answer = create_with_webhook(stranger, url)
        assert answer.status_code == 400, url
        assert answer.json["details"][0]["field"] == "webhookUrl"
    assert create_with_webhook(stranger, receiver.url).status_code == 201
    assert len(receiver.wait_for(1)) == 1
    assert {delivery["url"] for delivery in sandbox.deliveries()} == {receiver.url}


def test_an_allow_list_applies_on_loopback_too(make_sandbox):
    sandbox = make_sandbox(SANDBOX_WEBHOOK_ALLOW="https://portal.example")
    refused = sandbox.api(
        "POST",
        "/api/flows",
        json={
            "nationalId": "15108695088",
            "lastName": "Nordmann",
            "redirectUrl": "https://lender.example/done",
            "webhookUrl": "https://elsewhere.example/hooks",
        },
    )
    assert refused.status_code == 400
    assert sandbox.create(webhookUrl="https://portal.example:443/hooks")["flowId"]


@pytest.mark.parametrize(
    "settings",
    [
        {"SANDBOX_ALLOW_REMOTE": "maybe"},
        {"SANDBOX_CONTROL_TOKEN": "short"},
        {"SANDBOX_WEBHOOK_ALLOW": "ftp://portal.example"},
        {"SANDBOX_WEBHOOK_ALLOW": "https://portal.example/webhooks/flow"},
        {"SANDBOX_WEBHOOK_ALLOW": "portal.example"},
    ],
)
def test_bad_safety_settings_stop_start_up(settings, capsys):
    with pytest.raises(SystemExit) as stopped:
        create_sandbox(settings)
    assert stopped.value.code == 2
    assert next(iter(settings)) in capsys.readouterr().err


# -- the serving entry --------------------------------------------------------------------------


def sandbox_command(*arguments: str, **environment: str) -> tuple[list[str], dict]:
    env = {name: value for name, value in os.environ.items() if not name.startswith("SANDBOX_")}
    return [sys.executable, "-m", "flow_sandbox", *arguments], env | environment


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "203.0.113.5"])
def test_serve_refuses_a_non_loopback_host_in_one_line(host):
    command, env = sandbox_command("--host", host, "--port", "0")
    finished = subprocess.run(command, env=env, cwd=REPOSITORY, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert finished.stderr.count("\n") == 1 and finished.stdout == ""
    assert host in finished.stderr and "SANDBOX_ALLOW_REMOTE=1" in finished.stderr


@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_serve_refuses_a_port_no_socket_has(port):
    command, env = sandbox_command("--port", port)
    finished = subprocess.run(command, env=env, cwd=REPOSITORY, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2 and "a port is a number from 0 to 65535" in finished.stderr


def test_serve_reports_a_bad_setting_in_one_line():
    command, env = sandbox_command(SANDBOX_ALLOW_REMOTE="perhaps")
    finished = subprocess.run(command, env=env, cwd=REPOSITORY, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2 and finished.stderr.count("\n") == 1
    assert "SANDBOX_ALLOW_REMOTE" in finished.stderr


def test_bind_refusal_allows_loopback_names_and_remote_when_allowed():
    default, remote = load_sandbox_settings({}), load_sandbox_settings({"SANDBOX_ALLOW_REMOTE": "1"})
    assert [bind_refusal(host, default) for host in ("127.0.0.1", "::1", "localhost")] == [None] * 3
    assert bind_refusal("0.0.0.0", default) and bind_refusal("0.0.0.0", remote) is None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_serve_serves_on_loopback(tmp_path):
    port = free_port()
    command, env = sandbox_command("--port", str(port), SANDBOX_SEED="3")
    with (tmp_path / "sandbox.log").open("w") as log:
        server = subprocess.Popen(command, env=env, cwd=REPOSITORY, stdout=log, stderr=subprocess.STDOUT)
    try:
        discovery = wait_for_answer(f"http://127.0.0.1:{port}{DISCOVERY}", server)
        assert discovery.json()["flow_sandbox"] is True
    finally:
        server.terminate()
        server.wait(timeout=10)


def wait_for_answer(url: str, server: subprocess.Popen, timeout: float = 30) -> requests.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.poll() is None:
        try:
            return requests.get(url, timeout=1)
        except requests.ConnectionError:
            time.sleep(0.05)
    raise AssertionError(f"the sandbox did not start (exit status {server.poll()})")


# -- the sandbox is recognisable ----------------------------------------------------------------


def test_every_answer_carries_the_marker(sandbox):
    flow_id = sandbox.create()["flowId"]
    answers = [
        requests.get(sandbox.url + DISCOVERY, timeout=5),
        requests.post(sandbox.token_url, data={"grant_type": "client_credentials"}, timeout=5),
        sandbox.api("GET", "/api/flows"),
        sandbox.api("GET", "/api/flows", token=False),
        sandbox.api("GET", "/api/nothing-here"),
        requests.get(f"{sandbox.url}/consent/{flow_id}", timeout=5),
        requests.get(f"{sandbox.url}/static/sandbox.css", timeout=5),
        requests.get(sandbox.url + DISCOVERY, headers={"X-Forwarded-For": "203.0.113.5"}, timeout=5),
    ]
    assert [answer.headers.get("X-Flow-Sandbox") for answer in answers] == ["1"] * len(answers)


@pytest.mark.parametrize("path", [DISCOVERY, "/realms/sandbox/.well-known/openid-configuration"])
def test_discovery_says_it_is_the_sandbox(sandbox, path):
    assert requests.get(sandbox.url + path, timeout=5).json()["flow_sandbox"] is True


# -- a production portal refuses the sandbox ----------------------------------------------------


def strong(prefix: str = "") -> str:
    return prefix + secrets.token_urlsafe(48)


PRODUCTION_CLIENT = ("lender-client", strong())
PRODUCTION = production_settings(FLOW_CLIENT_ID=PRODUCTION_CLIENT[0], FLOW_CLIENT_SECRET=PRODUCTION_CLIENT[1])


class TestPortalAgainstTheSandbox:
    """The same non-demo client registered with a sandbox: production refuses it, test uses it."""

    @pytest.fixture
    def sandbox(self, make_sandbox, tmp_path):
        clients = tmp_path / "clients.json"
        client_id, client_secret = PRODUCTION_CLIENT
        clients.write_text(json.dumps([{"client_id": client_id, "client_secret": client_secret, "org": "lender"}]))
        return make_sandbox(SANDBOX_CLIENTS=str(clients))

    @pytest.fixture
    def app(self, request, make_app):
        return make_app(WTF_CSRF_ENABLED=False, **PRODUCTION | {"FLOW_ENVIRONMENT": request.param})

    @pytest.mark.parametrize("app", ["production"], indirect=True)
    def test_production_shows_that_it_points_at_the_sandbox(self, signed_in, sandbox):
        reference = self.create_flow(sandbox)
        answer = signed_in("operator").get("/flows")
        assert answer.status_code == 502
        page = answer.get_data(as_text=True)
        assert "FLOW_API_URL / FLOW_OIDC_URL point at the Flow Portal sandbox" in page
        assert reference not in page

    @pytest.mark.parametrize("app", ["production"], indirect=True)
    def test_production_check_names_the_setting(self, runner):
        result = runner.invoke(args=["check"])
        assert result.exit_code != 0
        assert "FLOW_OIDC_URL (or FLOW_TOKEN_URL) points at the Flow Portal sandbox" in result.output

    @pytest.mark.parametrize("app", ["test"], indirect=True)
    def test_the_test_environment_keeps_working(self, signed_in, sandbox):
        reference = self.create_flow(sandbox)
        answer = signed_in("operator").get("/flows")
        assert answer.status_code == 200
        assert reference in answer.get_data(as_text=True)

    @staticmethod
    def create_flow(sandbox) -> str:
        token = sandbox.token(client=PRODUCTION_CLIENT, scope="loan-application:create:no")
        return sandbox.create(token=token)["referenceId"]


def test_production_refuses_the_sandbox_api_too(make_sandbox, trusted_keys_file, client_key):
    """Self-signed JWTs fetch no token: the API answer itself is refused, naming FLOW_API_URL."""
    sandbox = make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted_keys_file))
    config = portal_config(sandbox.url, "sqlite://", **PRODUCTION, **jwt_settings(client_key))
    client = build_client(load_settings(config))
    with pytest.raises(SandboxInProduction, match="FLOW_API_URL points at the Flow Portal sandbox"):
        client.list_flows()
    test_client = build_client(load_settings(config | {"FLOW_ENVIRONMENT": "test"}))
    assert test_client.list_flows().items == []
