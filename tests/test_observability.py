"""Observability: /metrics for Prometheus, request ids end to end, JSON log lines, /readyz asking for a token."""

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urljoin

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from support import PASSWORD, portal_config

from flow_sandbox.settings import DEMO_WEBHOOK_SECRET
from portal.metrics import NO_REASON
from portal.settings import SettingsError, load_settings
from portal.views.health import THROTTLE_CHECK, TOKEN_CHECK, CachedCheck

ROOT = Path(__file__).resolve().parents[1]
METRICS_TOKEN = "metrics-token-0123456789abcdef"
NATIONAL_ID = "15108695088"
FAMILIES = {
    "portal_http_requests": "counter",
    "portal_http_request_duration_seconds": "histogram",
    "portal_upstream_requests": "counter",
    "portal_upstream_request_duration_seconds": "histogram",
    "portal_token_fetches": "counter",
    "portal_webhook_deliveries": "counter",
    "portal_db_errors": "counter",
}


class Metrics:
    """One scrape, parsed with prometheus_client's own parser."""

    def __init__(self, text: str):
        self.families = {family.name: family for family in text_string_to_metric_families(text)}

    def value(self, sample: str, **labels) -> float:
        """The sum of the samples named `sample` whose labels include `labels` (0 when there are none)."""
        return sum(
            found.value
            for family in self.families.values()
            for found in family.samples
            if found.name == sample and labels.items() <= found.labels.items()
        )


def scrape(url: str, **headers) -> Metrics:
    answer = requests.get(url + "/metrics", headers=headers, timeout=10)
    assert answer.status_code == 200, answer.status_code
    return Metrics(answer.text)


def scrape_app(app) -> Metrics:
    answer = app.test_client().get("/metrics")  # the test client comes from 127.0.0.1
    assert answer.status_code == 200, answer.status_code
    return Metrics(answer.text)


def settings_env(sandbox_url: str, database: str, **overrides) -> dict:
    """The process environment of a portal run from its environment: no FLOW_/PORTAL_ variable of ours leaks in."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLOW_", "PORTAL_", "PROMETHEUS_"))}
    config = portal_config(sandbox_url, database, **overrides)
    return env | {key: value for key, value in config.items() if isinstance(value, str)}


# -- /metrics: who may scrape ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "authorization", "status"),
    [
        ("127.0.0.1", None, 200),
        ("::1", None, 200),
        ("::ffff:127.0.0.1", None, 200),
        ("203.0.113.7", None, 404),
        ("203.0.113.7", f"Bearer {METRICS_TOKEN}", 200),
        ("203.0.113.7", f"bearer {METRICS_TOKEN}", 200),
        ("203.0.113.7", "Bearer not-the-metrics-token", 404),
        ("203.0.113.7", f"Bearer {METRICS_TOKEN}x", 404),
        ("203.0.113.7", f"Basic {METRICS_TOKEN}", 404),
    ],
)
def test_metrics_for_loopback_or_the_bearer_token_only(make_app, address, authorization, status):
    app = make_app(PORTAL_METRICS_TOKEN=METRICS_TOKEN)
    headers = {"Authorization": authorization} if authorization else {}
    answer = app.test_client().get("/metrics", headers=headers, environ_base={"REMOTE_ADDR": address})
    assert answer.status_code == status
    if status == 200:
        assert answer.mimetype == "text/plain" and "portal_http_requests_total" in answer.text
        assert answer.headers["Cache-Control"] == "no-store"  # as every answer but a file (an attack)
    else:
        assert "portal_" not in answer.text


@pytest.mark.parametrize(
    ("allow", "address", "status"),
    [
        ("10.0.0.0/8, 192.0.2.1", "10.20.30.40", 200),
        ("10.0.0.0/8, 192.0.2.1", "192.0.2.1", 200),
        ("10.0.0.0/8, 192.0.2.1", "192.0.2.2", 404),
        ("10.0.0.0/8, 192.0.2.1", "127.0.0.1", 404),
        ("none", "127.0.0.1", 404),
    ],
)
def test_metrics_from_the_configured_addresses(make_app, allow, address, status):
    app = make_app(PORTAL_METRICS_ALLOW=allow)
    answer = app.test_client().get("/metrics", environ_base={"REMOTE_ADDR": address})
    assert answer.status_code == status


def test_metrics_behind_a_trusted_proxy_see_the_client_address(make_app):
    app = make_app(PORTAL_TRUSTED_PROXIES="1")
    client = app.test_client()
    relayed = {"X-Forwarded-For": "203.0.113.7"}
    assert client.get("/metrics", headers=relayed, environ_base={"REMOTE_ADDR": "127.0.0.1"}).status_code == 404


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("PORTAL_METRICS_ALLOW", "10.0.0.0/33", "PORTAL_METRICS_ALLOW: '10.0.0.0/33' does not appear"),
        ("PORTAL_METRICS_ALLOW", "127.0.0.1, metrics.example", "PORTAL_METRICS_ALLOW: 'metrics.example'"),
        ("PORTAL_METRICS_TOKEN", "short", "PORTAL_METRICS_TOKEN must be at least 16 characters"),
    ],
)
def test_metrics_settings_are_checked(name, value, says):
    with pytest.raises(SettingsError) as raised:
        load_settings(portal_config("http://127.0.0.1:9", "sqlite:///x.db", **{name: value}), testing=True)
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


def test_the_metrics_token_comes_from_a_file_and_is_never_shown(tmp_path):
    (tmp_path / "metrics-token").write_text(METRICS_TOKEN + "\n")
    config = portal_config(
        "http://127.0.0.1:9", "sqlite:///x.db", PORTAL_METRICS_TOKEN_FILE=str(tmp_path / "metrics-token")
    )
    settings = load_settings(config, testing=True)
    assert settings.metrics_token == METRICS_TOKEN and METRICS_TOKEN not in repr(settings)
    assert [str(network) for network in settings.metrics_allow] == ["127.0.0.1/32", "::1/128"]


# -- /metrics: what moves -------------------------------------------------------------------------


def test_scraped_metrics_move_with_pages_and_upstream_calls(app, serve, make_user, sandbox):
    url = serve(app)
    flow_id = sandbox.create()["flowId"]
    before = scrape(url)
    assert set(FAMILIES.items()) <= {(name, family.type) for name, family in before.families.items()}

    browser = requests.Session()
    signed = browser.post(url + "/login", data={"username": make_user(), "password": PASSWORD}, timeout=10)
    assert signed.status_code == 200 and signed.url == url + "/flows"  # the flow list, after the redirect
    assert browser.get(url + f"/flows/{flow_id}", timeout=10).status_code == 200
    sandbox.fault(mode="error", status=503, count=3)  # the first try and both retries
    assert browser.get(url + f"/flows/{flow_id}", timeout=10).status_code >= 500
    assert requests.get(url + "/no-such-page", timeout=10).status_code == 404
    after = scrape(url)

    def moved(sample: str, **labels) -> float:
        return after.value(sample, **labels) - before.value(sample, **labels)

    assert moved("portal_http_requests_total", endpoint="flows.index", status="200") == 1
    assert moved("portal_http_requests_total", endpoint="auth.login", status="302") == 1
    assert moved("portal_http_requests_total", endpoint="unmatched", status="404") == 1
    assert moved("portal_http_request_duration_seconds_count", endpoint="flows.detail") == 2
    assert moved("portal_http_request_duration_seconds_bucket", endpoint="flows.detail", le="+Inf") == 2
    assert moved("portal_upstream_requests_total", method="GET", outcome="ok") >= 2
    assert moved("portal_upstream_requests_total", method="GET", outcome="http_5xx") == 3
    assert moved("portal_upstream_request_duration_seconds_count", method="GET", outcome="ok") >= 2
    assert moved("portal_token_fetches_total", outcome="ok") >= 1
    assert {sample.labels["reason"] for sample in after.families["portal_webhook_deliveries"].samples} >= {
        "none",
        "signature",
        "other",
    }


# -- request ids ----------------------------------------------------------------------------------


@pytest.fixture
def upstream_ids(sandbox) -> list[str | None]:
    """The X-Request-Id of every API call the sandbox receives from now on."""
    seen, inner = [], sandbox.app.wsgi_app

    def recording(environ, start_response):
        if environ["PATH_INFO"].startswith("/api/"):
            seen.append(environ.get("HTTP_X_REQUEST_ID"))
        return inner(environ, start_response)

    sandbox.app.wsgi_app = recording
    return seen


def test_a_request_id_is_echoed_and_sent_to_the_flow_service(signed_in, upstream_ids):
    answer = signed_in("viewer").get("/flows", headers={"X-Request-Id": "lb-7f3a.9_Z-1"})
    assert answer.status_code == 200 and answer.headers["X-Request-Id"] == "lb-7f3a.9_Z-1"
    assert upstream_ids and set(upstream_ids) == {"lb-7f3a.9_Z-1"}


def test_a_request_id_that_holds_a_national_id_is_replaced(signed_in):
    """It would reach the Flow Service and an error page's support code whole (the log lines mask it)."""
    client = signed_in("viewer")
    for incoming in ("15108695088", "x-15108695088", "1510-8695088"):
        assert re.fullmatch(
            r"[0-9a-f]{32}", client.get("/nowhere", headers={"X-Request-Id": incoming}).headers["X-Request-Id"]
        )


def test_a_request_id_made_here_never_reads_as_a_national_id(signed_in, monkeypatch):
    """One uuid4 in ~2,000 holds digits that read as a national id: the log masked it, and the page's support code
    was then nowhere in the log (found by a new user)."""
    client = signed_in("viewer")
    made = iter([uuid.UUID("15108695088" + "a" * 21), uuid.UUID("ab" * 16)])
    monkeypatch.setattr("portal.requestid.uuid.uuid4", lambda: next(made))
    assert client.get("/nowhere").headers["X-Request-Id"] == "ab" * 16


@pytest.mark.parametrize("incoming", [None, "", "x" * 65, "has space", "semi;colon", "ünï", "a/b"])
def test_a_missing_or_malformed_request_id_is_replaced(signed_in, upstream_ids, incoming):
    client = signed_in("viewer")
    answer = client.get("/flows", headers={} if incoming is None else {"X-Request-Id": incoming})
    request_id = answer.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f]{32}", request_id)
    assert set(upstream_ids) == {request_id}
    assert client.get("/healthz").headers["X-Request-Id"] != request_id, "a new one for every request"


def test_the_access_line_names_the_request(signed_in, caplog):
    client = signed_in("viewer")
    caplog.set_level("INFO", logger="portal")
    answer = client.get(f"/flows?q={NATIONAL_ID}", headers={"X-Request-Id": "access-line-1"})
    assert answer.status_code == 302  # to the search by the id's keyed hash
    [line] = [record for record in caplog.records if record.name == "portal.access" and record.path == "/flows"]
    assert (line.method, line.path, line.endpoint, line.status) == ("GET", "/flows", "flows.index", 302)
    assert line.user_id and line.remote_addr == "127.0.0.1" and line.duration_ms >= 0
    assert line.request_id == "access-line-1" and NATIONAL_ID not in caplog.text


def test_a_page_s_questions_in_the_background_are_logged_at_debug(signed_in, client, caplog):
    """Every open flow page asks for news every 15 s: INFO lines for each would bury the people's requests."""
    staff = signed_in("viewer")
    caplog.set_level("INFO", logger="portal")
    assert staff.get("/events/heard?after=0").status_code == 200
    assert client.get("/events/heard?after=0").status_code == 401  # signed out: worth a line
    lines = [(record.path, record.status) for record in caplog.records if record.name == "portal.access"]
    assert [line for line in lines if line[0] == "/events/heard"] == [("/events/heard", 401)]
    caplog.set_level("DEBUG", logger="portal")
    staff.get("/events/heard?after=0")
    assert ("/events/heard", 200) in [
        (record.path, record.status) for record in caplog.records if record.name == "portal.access"
    ]


# -- /readyz --------------------------------------------------------------------------------------


def test_ready_when_the_database_answers_and_a_token_comes(client):
    answer = client.get("/readyz")
    assert answer.status_code == 200
    assert answer.json == {"status": "ok", "database": "ok", "token": "ok"}


def test_a_database_never_migrated_is_a_503_page_not_an_unexpected_error(make_app, database_url):
    """Found by an operator: on PostgreSQL without tables, a sign-in answered 500 (UndefinedTable, logged as an
    unhandled error) while /readyz said not_migrated."""
    from flask_migrate import downgrade

    app = make_app(database=database_url, WTF_CSRF_ENABLED=False)
    with app.app_context():
        downgrade(revision="base")
    answer = app.test_client().post("/login", data={"username": "kari", "password": "x" * 12})
    assert answer.status_code == 503 and "database is unavailable" in answer.text


def test_readiness_reports_a_shared_throttling_store_that_is_away(make_app, redis_url):
    """Found by an operator: with Redis away /readyz said all was well while every sign-in was refused."""
    assert make_app(PORTAL_REDIS_URL=redis_url).test_client().get("/readyz").json["throttle"] == "ok"
    away = make_app(PORTAL_REDIS_URL="redis://127.0.0.1:9/0").test_client().get("/readyz")
    assert away.status_code == 200 and away.json["throttle"] == "unreachable", "reported, staff signed in go on"


def test_the_throttling_store_is_asked_at_most_every_five_seconds(make_app, hanging_server):
    """A probe asking /readyz every second of a Redis that hangs waited out the store's timeout at every call."""
    app = make_app(PORTAL_REDIS_URL=f"redis://127.0.0.1:{hanging_server.port}/0")
    now = [0.0]
    app.extensions[THROTTLE_CHECK] = CachedCheck(seconds=5, clock=lambda: now[0])
    client = app.test_client()
    asked = hanging_server.accepted
    assert client.get("/readyz").json["throttle"] == "unreachable"
    assert hanging_server.accepted > asked
    asked = hanging_server.accepted
    now[0] = 4.9
    assert client.get("/readyz").json["throttle"] == "unreachable"
    assert hanging_server.accepted == asked, "answered from the cache"
    now[0] = 5.0
    assert client.get("/readyz").json["throttle"] == "unreachable"
    assert hanging_server.accepted > asked


def test_not_ready_on_a_database_behind_this_codes_migrations(app):
    from flask_migrate import downgrade, upgrade

    client = app.test_client()
    with app.app_context():
        downgrade(revision="0013_audit_action_index")
    answer = client.get("/readyz")
    assert answer.status_code == 503 and answer.json["database"] == "not_migrated"
    with app.app_context():
        downgrade(revision="base")
    assert client.get("/readyz").json["database"] == "not_migrated", "no alembic_version table at all"
    with app.app_context():
        upgrade()
    assert client.get("/readyz").json == {"status": "ok", "database": "ok", "token": "ok"}


@pytest.mark.parametrize(
    ("settings", "fault", "kind"),
    [
        ({}, {"mode": "error", "target": "token", "status": 503}, "http_5xx"),
        ({"FLOW_CLIENT_SECRET": "not-the-demo-secret"}, None, "http_4xx"),
    ],
)
def test_not_ready_when_the_identity_provider_gives_no_token(make_app, sandbox, settings, fault, kind):
    app = make_app(FLOW_RETRIES="0", **settings)
    if fault:
        sandbox.fault(**fault)
    fetches = scrape_app(app).value("portal_token_fetches_total", outcome=kind)
    answer = app.test_client().get("/readyz")
    assert answer.status_code == 503
    assert answer.json == {"status": "unavailable", "database": "ok", "token": "unavailable", "token_error": kind}
    assert scrape_app(app).value("portal_token_fetches_total", outcome=kind) == fetches + 1


def test_the_token_check_is_answered_from_a_cache_for_five_seconds(app, sandbox):
    now = [0.0]
    app.extensions[TOKEN_CHECK] = CachedCheck(seconds=5, clock=lambda: now[0])
    client = app.test_client()
    assert client.get("/readyz").status_code == 200
    asked = sandbox.stats()["token_requests"]
    provider = app.extensions["flow_client"].provider
    provider.invalidate(provider.token())  # a check that asks the provider now makes it fetch a new token
    now[0] = 4.9
    assert client.get("/readyz").status_code == 200
    assert sandbox.stats()["token_requests"] == asked, "answered from the cache"
    now[0] = 5.0
    assert client.get("/readyz").status_code == 200
    assert sandbox.stats()["token_requests"] == asked + 1


# -- JSON log lines -------------------------------------------------------------------------------


DEVELOPMENT_SERVER = f"""
import logging, threading, urllib.request
from werkzeug.serving import make_server
from portal import create_app

server = make_server("127.0.0.1", 0, create_app())
serving = threading.Thread(target=server.handle_request)
serving.start()
urllib.request.urlopen(f"http://127.0.0.1:{{server.server_port}}/healthz?q={NATIONAL_ID}").read()
serving.join()
logging.getLogger("portal.test").warning("upstream said %s", 'one\\r\\n{{"forged": 1}} {NATIONAL_ID}')
"""


def test_log_lines_outside_gunicorn_are_json_and_masked(tmp_path):
    env = settings_env("http://127.0.0.1:9", f"sqlite:///{tmp_path / 'portal.db'}")
    result = subprocess.run(
        [sys.executable, "-c", DEVELOPMENT_SERVER], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    access, warning = (json.loads(line) for line in result.stderr.splitlines())  # werkzeug's own line is left out
    assert (access["logger"], access["path"], access["status"]) == ("portal.access", "/healthz", 200)
    assert (warning["level"], warning["logger"]) == ("WARNING", "portal.test")
    assert warning["message"].startswith('upstream said one\r\n{"forged": 1} 151086')
    assert NATIONAL_ID not in result.stderr and "q=" not in result.stderr and warning["time"].endswith("+00:00")


class HostileUpstream:
    """Wraps the sandbox: while `on`, the flow list answers 502 with CR/LF, JSON and a national id in every field."""

    BODY = {
        "error": 'bad\r\n{"level": "ERROR", "forged": true}',
        "message": f'Traceback (most recent call last):\r\n{{"forged": true, "id": "{NATIONAL_ID}"}}',
        "details": [{"field": "lastName\r\nforged", "message": f"line\r\n{NATIONAL_ID}"}],
    }

    def __init__(self, sandbox):
        self.on, self.request_ids, self.inner = False, [], sandbox.app.wsgi_app
        sandbox.app.wsgi_app = self

    def __call__(self, environ, start_response):
        if environ["PATH_INFO"].startswith("/api/"):
            self.request_ids.append(environ.get("HTTP_X_REQUEST_ID"))
        if self.on and environ["PATH_INFO"] == "/api/flows" and environ["REQUEST_METHOD"] == "GET":
            start_response("502 Bad Gateway", [("Content-Type", "application/json")])
            return [json.dumps(self.BODY).encode()]
        return self.inner(environ, start_response)


class Gunicorn:
    """The portal under gunicorn with the repository's gunicorn.conf.py; its stdout and stderr kept in files."""

    def __init__(self, env: dict, folder: Path):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.url, self.folder = f"http://127.0.0.1:{port}", folder
        command = [sys.executable, "-m", "gunicorn", "-c", str(ROOT / "gunicorn.conf.py"), "--pythonpath", str(ROOT)]
        command += ["--workers", "2", "--threads", "2", "--bind", f"127.0.0.1:{port}", "--graceful-timeout", "2"]
        with (folder / "stdout.log").open("w") as out, (folder / "stderr.log").open("w") as err:
            self.process = subprocess.Popen([*command, "wsgi:app"], cwd=folder, env=env, stdout=out, stderr=err)
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(self.url + "/healthz", timeout=5)
                return
            except requests.RequestException:
                assert self.process.poll() is None and time.monotonic() < deadline, self.output()
                time.sleep(0.1)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait(15)

    def output(self) -> str:
        return (self.folder / "stdout.log").read_text() + (self.folder / "stderr.log").read_text()


@pytest.fixture
def hostile(sandbox) -> HostileUpstream:
    return HostileUpstream(sandbox)


@pytest.fixture
def gunicorn_portal(app, sqlite_url, sandbox, hostile, tmp_path):
    """gunicorn (2 workers) on `app`'s database and the default sandbox (through `hostile`)."""
    env = settings_env(sandbox.url, sqlite_url, FLOW_RETRIES="0", PORTAL_METRICS_TOKEN=METRICS_TOKEN)
    server = Gunicorn(env, tmp_path)
    yield server
    server.stop()


def hidden_fields(page: str) -> dict:
    return dict(re.findall(r'name="([^"]+)" type="hidden" value="([^"]*)"', page))


def submit(browser: requests.Session, url: str, **fields) -> requests.Response:
    """Open the form at `url` and send it with `fields`, as a browser would (CSRF and hidden fields included)."""
    page = browser.get(url, timeout=30)
    assert page.status_code == 200, page.status_code
    return browser.post(url, data=hidden_fields(page.text) | fields, timeout=30, allow_redirects=False)


def wait_for_delivery(sandbox, url: str) -> dict:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        delivered = [entry for entry in sandbox.deliveries() if entry["url"] == url and entry["ok"]]
        if delivered:
            return delivered[0]
        time.sleep(0.05)
    raise AssertionError(f"no delivery to {url}: {sandbox.deliveries()}")


def test_a_page_s_answered_questions_write_no_access_line_of_gunicorn_s_either(gunicorn_portal, make_user):
    """Found by a re-check: the portal's access line of an answered question went to DEBUG (599f186), but gunicorn's
    own access line (gunicorn.conf.py) still said every question of every open page at INFO, every 15 s: the log
    the change was to keep readable was as full as before. A refused one (401) is still worth a line."""
    url, browser = gunicorn_portal.url, requests.Session()
    assert submit(browser, url + "/login", username=make_user("viewer"), password=PASSWORD).status_code == 302
    for _ in range(3):
        assert browser.get(url + "/events/heard?after=0", timeout=30).status_code == 200
    assert requests.get(url + "/events/heard?after=0", timeout=30).status_code == 401
    gunicorn_portal.stop()
    entries = [json.loads(line) for line in gunicorn_portal.output().splitlines()]
    heard = [(entry["logger"], entry["status"]) for entry in entries if entry.get("path") == "/events/heard"]
    assert sorted(heard) == [("gunicorn.access", 401), ("portal.access", 401)]


def test_every_log_line_of_a_gunicorn_session_is_json_without_secrets(gunicorn_portal, sandbox, hostile, make_user):
    url, browser = gunicorn_portal.url, requests.Session()
    signed = submit(browser, url + "/login", username=make_user("operator"), password=PASSWORD)
    assert signed.status_code == 302, signed.text[:500]
    assert browser.get(url + "/flows", timeout=30).status_code == 200
    assert browser.get(url + "/flows", params={"q": NATIONAL_ID}, timeout=30).status_code == 200
    webhook_url = url + "/webhooks/flow"
    flow = {"country": "no", "national_id": NATIONAL_ID, "last_name": "Nordmann", "webhook_url": webhook_url}
    flow["real_person"] = "y"  # a real-looking number in the test environment: agreed
    created = submit(browser, url + "/flows/new", redirect_url="https://lender.example/done", **flow)
    assert created.status_code == 302, created.text[:500]
    detail = browser.get(urljoin(url, created.headers["Location"]), timeout=30, headers={"X-Request-Id": "obs-run-1"})
    assert detail.status_code == 200 and detail.headers["X-Request-Id"] == "obs-run-1"
    assert "obs-run-1" in hostile.request_ids
    sandbox.control(created.headers["Location"].rsplit("/", 1)[-1], "accept").raise_for_status()
    wait_for_delivery(sandbox, webhook_url)
    junk = requests.post(webhook_url, json={"forged": True}, timeout=10)
    assert 400 <= junk.status_code < 500
    hostile.on = True
    away = browser.get(url + "/flows", timeout=30, allow_redirects=False)  # the list falls back to the index
    assert away.status_code == 302 and away.headers["Location"] == "/flows?archived=all"
    hostile.on = False
    assert browser.get(url + "/flows/x%0d%0a%7B%22forged%22%3A%201%7D", timeout=30).status_code >= 400
    metrics = scrape(url, Authorization=f"Bearer {METRICS_TOKEN}")
    assert metrics.value("portal_http_requests_total", endpoint="flows.index") == 4, "every worker's requests"
    gunicorn_portal.stop()

    lines = gunicorn_portal.output().splitlines()
    entries = [json.loads(line) for line in lines]  # every line is one JSON object: none was forged
    assert all({"time", "level", "logger", "message"} <= entry.keys() and "forged" not in entry for entry in entries)
    assert not [entry for entry in entries if "\n" in entry["message"] or "\r" in entry["message"]]
    loggers = {entry["logger"] for entry in entries}
    assert {"gunicorn.error", "gunicorn.access", "portal.access", "portal.flowapi.text"} <= loggers
    output = "\n".join(lines)
    for secret in ("demo-secret", "test-secret-key-0123456789", "test-index-key-0123456789", METRICS_TOKEN):
        assert secret not in output
    for secret in (DEMO_WEBHOOK_SECRET.removeprefix("whsec_"), "Bearer ", "eyJ", NATIONAL_ID):
        assert secret not in output
    traced = [entry["logger"] for entry in entries if entry.get("request_id") == "obs-run-1"]
    assert sorted(traced) == ["gunicorn.access", "portal.access"]
    # A stored delivery is its own record: its access lines are written at DEBUG only; the refused one is logged.
    webhook_lines = [entry for entry in entries if entry.get("path") == "/webhooks/flow"]
    assert [(entry["logger"], entry["status"]) for entry in webhook_lines if entry["logger"] == "gunicorn.access"] == [
        ("gunicorn.access", junk.status_code)
    ]
    assert metrics.value("portal_webhook_deliveries_total", outcome="stored", reason=NO_REASON) >= 1
    assert all("?" not in entry.get("path", "") for entry in entries)


@pytest.mark.parametrize(("level", "shown"), [("INFO", True), ("WARNING", False)])
def test_migrations_say_what_they_run_at_the_portal_s_log_level(tmp_path, sandbox, caplog, level, shown):
    """An operator's walk: with PORTAL_LOG_LEVEL=WARNING, `flask db upgrade` still wrote every "Running upgrade"."""
    from flask_migrate import upgrade

    from portal import create_app

    app = create_app(portal_config(sandbox.url, f"sqlite:///{tmp_path / 'fresh.db'}", PORTAL_LOG_LEVEL=level))
    caplog.set_level("DEBUG")
    with app.app_context():
        upgrade()
    running = [record for record in caplog.records if record.getMessage().startswith("Running upgrade")]
    assert bool(running) is shown
    app.extensions["flow_index"].close()
