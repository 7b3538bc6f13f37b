"""Fault injection: each mode as a raw HTTP client sees it."""

import time

import pytest
import requests
from support import Clock


def test_error_fault_answers_5xx_for_count_requests(sandbox):
    token = sandbox.token()
    sandbox.fault(mode="error", status=502, count=2)
    assert [sandbox.api("GET", "/api/flows", token).status_code for _ in range(3)] == [502, 502, 200]


def test_latency_fault_delays(sandbox):
    token = sandbox.token()
    sandbox.fault(mode="latency", ms=300, count=1)
    started = time.monotonic()
    assert sandbox.api("GET", "/api/flows", token).status_code == 200
    assert time.monotonic() - started >= 0.3


def test_timeout_fault_holds_the_answer(sandbox):
    token = sandbox.token()
    sandbox.fault(mode="timeout", seconds=3, count=1)
    with pytest.raises(requests.ReadTimeout):
        requests.get(f"{sandbox.url}/api/flows", headers={"Authorization": f"Bearer {token}"}, timeout=(1, 0.5))


def test_malformed_fault_sends_broken_json(sandbox):
    token = sandbox.token()
    sandbox.fault(mode="malformed", count=1)
    answer = sandbox.api("GET", "/api/flows", token)
    assert answer.status_code == 200
    with pytest.raises(ValueError):
        answer.json()


def test_rate_limit_fault_sends_retry_after(sandbox):
    token = sandbox.token()
    sandbox.fault(mode="rate_limit", retry_after=7, count=1)
    answer = sandbox.api("GET", "/api/flows", token)
    assert answer.status_code == 429
    assert answer.headers["Retry-After"] == "7"
    assert answer.json()["error"] == "rate_limited"


def test_expire_tokens_revokes_issued_tokens(sandbox):
    old = sandbox.token()
    sandbox.fault(mode="expire_tokens")
    assert sandbox.api("GET", "/api/flows", old).status_code == 401
    assert sandbox.api("GET", "/api/flows", sandbox.token()).status_code == 200


def test_expire_tokens_with_lifetime_makes_new_tokens_die_early(sandbox):
    service_clock = Clock(time.time())
    sandbox.app.extensions["flow_sandbox"].identity.clock = service_clock
    sandbox.fault(mode="expire_tokens", lifetime=1)
    service_clock.now += 0.5  # a token issued from here on is not a revoked one
    token = sandbox.token()
    answer = requests.post(
        sandbox.token_url,
        data={
            "grant_type": "client_credentials",
            "client_id": "demo-client",
            "client_secret": "demo-secret",
            "scope": "loan-application:create:no",
        },
        timeout=5,
    )
    assert answer.json()["expires_in"] == 300
    assert sandbox.api("GET", "/api/flows", token).status_code == 200
    service_clock.now += 3  # past its one second, rounded up to the next whole second
    assert sandbox.api("GET", "/api/flows", token).status_code == 401


def test_token_target_fault_hits_only_the_token_endpoint(sandbox):
    token = sandbox.token()
    sandbox.fault(mode="error", status=503, target="token", count=1)
    assert sandbox.api("GET", "/api/flows", token).status_code == 200
    answer = requests.post(sandbox.token_url, data={"grant_type": "client_credentials"}, timeout=5)
    assert answer.status_code == 503


def test_faults_are_listed_and_cleared(sandbox):
    sandbox.fault(mode="error")
    listed = requests.get(f"{sandbox.url}/sandbox/faults", timeout=5).json()["faults"]
    assert listed[0]["mode"] == "error"
    assert requests.delete(f"{sandbox.url}/sandbox/faults", timeout=5).status_code == 204
    assert sandbox.api("GET", "/api/flows").status_code == 200


@pytest.mark.parametrize(
    "spec",
    [
        {"mode": "explode"},
        {"mode": "error", "status": 404},
        {"mode": "latency", "ms": -1},
        {"mode": "error", "target": "db"},
        {"mode": "error", "count": 0},
        [],
        None,
        {"mode": "error", "status": True},
    ],
)
def test_bad_fault_descriptions_are_400(sandbox, spec):
    answer = requests.post(f"{sandbox.url}/sandbox/faults", json=spec, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"] == "validation_error"
