"""Shared fixtures: live servers on 127.0.0.1, the sandbox, the portal app, users, databases."""

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests
from flask_migrate import upgrade
from joserfc.jwk import RSAKey
from sqlalchemy import create_engine, text
from werkzeug.serving import make_server

from portal import create_app
from portal.extensions import db
from portal.models import User
from portal.sandbox import create_app as create_sandbox
from portal.sandbox.settings import DEMO_WEBHOOK_SECRET

PASSWORD = "correct horse battery"
ALL_CREATE_SCOPES = "loan-application:create:no loan-application:create:se loan-application:create:fi"


class LiveServer:
    """A WSGI app served by werkzeug on a free 127.0.0.1 port, in a thread."""

    def __init__(self, app):
        self.app = app
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def serve():
    """Serve apps for the duration of a test: `url = serve(app)`."""
    servers = []

    def start(app) -> str:
        servers.append(LiveServer(app))
        return servers[-1].url

    yield start
    for server in servers:
        server.stop()


@dataclass
class Sandbox:
    url: str
    app: object

    @property
    def token_url(self) -> str:
        return f"{self.url}/realms/sandbox/protocol/openid-connect/token"

    def token(self, scope: str = ALL_CREATE_SCOPES, client=("demo-client", "demo-secret")) -> str:
        answer = requests.post(
            self.token_url,
            data={
                "grant_type": "client_credentials",
                "client_id": client[0],
                "client_secret": client[1],
                "scope": scope,
            },
            timeout=5,
        )
        answer.raise_for_status()
        return answer.json()["access_token"]

    def api(self, method: str, path: str, token: str | None = None, **kwargs) -> requests.Response:
        headers = kwargs.pop("headers", {})
        if token is not False:
            headers.setdefault("Authorization", f"Bearer {token or self.token()}")
        return requests.request(method, self.url + path, headers=headers, timeout=10, **kwargs)

    def create(self, national_id="15108695088", last_name="Nordmann", token=None, **extra) -> dict:
        body = {"nationalId": national_id, "lastName": last_name, "redirectUrl": "https://lender.example/done", **extra}
        answer = self.api("POST", "/api/flows", token, json=body)
        assert answer.status_code == 201, answer.text
        return answer.json()

    def control(self, flow_id: str, action: str) -> requests.Response:
        return requests.post(f"{self.url}/sandbox/flows/{flow_id}/{action}", timeout=5)

    def fault(self, **spec) -> None:
        requests.post(f"{self.url}/sandbox/faults", json=spec, timeout=5).raise_for_status()

    def stats(self) -> dict:
        return requests.get(f"{self.url}/sandbox/stats", timeout=5).json()

    def deliveries(self) -> list[dict]:
        return requests.get(f"{self.url}/sandbox/webhooks", timeout=5).json()["deliveries"]


@pytest.fixture
def make_sandbox(serve):
    """Start a fresh sandbox with SANDBOX_* settings: `make_sandbox(SANDBOX_SEED="5")`."""
    apps = []

    def start(**settings) -> Sandbox:
        config = {"SANDBOX_WEBHOOK_BACKOFF": "0.05", "SANDBOX_WEBHOOK_TIMEOUT": "2"} | settings
        app = create_sandbox(config)
        apps.append(app)
        return Sandbox(serve(app), app)

    yield start
    for app in apps:
        app.extensions["flow_sandbox"].sender.close()


@pytest.fixture
def sandbox(make_sandbox) -> Sandbox:
    return make_sandbox()


@dataclass(frozen=True)
class ClientKey:
    kid: str
    private_pem: Path
    jwks: dict


@pytest.fixture(scope="session")
def client_key(tmp_path_factory) -> ClientKey:
    """One 4096-bit key pair for the whole run: generating it takes seconds."""
    folder = tmp_path_factory.mktemp("client-key")
    key = RSAKey.generate_key(4096, parameters={"kid": "test-client-key"})
    pem = folder / "test-client-key.pem"
    pem.write_bytes(key.as_pem(private=True))
    return ClientKey("test-client-key", pem, {"keys": [key.as_dict(private=False)]})


@pytest.fixture
def trusted_keys_file(tmp_path, client_key) -> Path:
    path = tmp_path / "trusted.jwks.json"
    path.write_text(json.dumps(client_key.jwks))
    return path


# -- databases ---------------------------------------------------------------------------------

POSTGRES_VARIABLE = "PORTAL_TEST_POSTGRES_URL"


def _fresh_postgres(url: str) -> str:
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    """Each store test runs on SQLite and on PostgreSQL (in CI always; elsewhere when configured)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'portal.db'}"
    url = os.environ.get(POSTGRES_VARIABLE)
    if not url:
        if os.environ.get("CI"):
            pytest.fail(f"{POSTGRES_VARIABLE} must be set in CI")
        pytest.skip(f"PostgreSQL not configured: set {POSTGRES_VARIABLE}")
    return _fresh_postgres(url)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'portal.db'}"


# -- the portal --------------------------------------------------------------------------------


def portal_config(sandbox_url: str, database: str, **overrides) -> dict:
    return {
        "TESTING": True,
        "FLOW_ENVIRONMENT": "test",
        "FLOW_API_URL": sandbox_url,
        "FLOW_OIDC_URL": sandbox_url,
        "FLOW_REALM": "sandbox",
        "FLOW_CLIENT_ID": "demo-client",
        "FLOW_CLIENT_SECRET": "demo-secret",
        "FLOW_SCOPES": ALL_CREATE_SCOPES,
        "FLOW_WEBHOOK_SECRETS": DEMO_WEBHOOK_SECRET,
        "FLOW_READ_TIMEOUT": "5",
        "PORTAL_SECRET_KEY": "test-secret-key-0123456789",
        "PORTAL_DATABASE_URL": database,
        "PORTAL_PUBLIC_URL": "http://127.0.0.1:5000",
        "RATELIMIT_ENABLED": False,
    } | overrides


def migrated(app):
    with app.app_context():
        upgrade()
    return app


@pytest.fixture
def make_app(sandbox, sqlite_url):
    """Build a migrated portal against the default sandbox: `make_app(FLOW_SCOPES="...")`."""
    apps = []

    def build(database=None, sandbox_url=None, **overrides):
        app = migrated(create_app(portal_config(sandbox_url or sandbox.url, database or sqlite_url, **overrides)))
        apps.append(app)
        return app

    yield build
    for app in apps:
        with app.app_context():
            db.engine.dispose()


@pytest.fixture
def app(make_app):
    return make_app(WTF_CSRF_ENABLED=False)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def runner(app):
    return app.test_cli_runner()


@pytest.fixture
def make_user(app):
    """Create a staff account: `make_user("operator")` returns its username."""

    def create(role="viewer", username=None, disabled=False):
        with app.app_context():
            taken = db.session.query(User).filter(User.username.like(f"{role}-user%")).count()
            default = f"{role}-user" + (f"-{taken + 1}" if taken else "")
            user = User(username=username or default, role=role, disabled=disabled)
            user.set_password(PASSWORD)
            db.session.add(user)
            db.session.commit()
            return user.username

    return create


def sign_in(client, username: str, password: str = PASSWORD, next_url: str = ""):
    return client.post("/login", data={"username": username, "password": password, "next": next_url})


@pytest.fixture
def signed_in(app, make_user):
    """A new test client signed in with the given role: `signed_in("operator")`."""

    def as_role(role="viewer"):
        client = app.test_client()
        answer = sign_in(client, make_user(role))
        assert answer.status_code == 302, answer.text
        return client

    return as_role


class Receiver:
    """A stand-in webhook endpoint that records every delivery and answers `status`."""

    def __init__(self, serve):
        from flask import Flask, request

        self.deliveries: list[dict] = []
        self.status = 204
        self.delay = 0.0
        app = Flask("receiver")

        @app.post("/hooks")
        def hook():
            import time

            time.sleep(self.delay)
            self.deliveries.append({"headers": dict(request.headers), "body": request.get_data()})
            return "", self.status

        self.url = serve(app) + "/hooks"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        import time

        deadline = time.monotonic() + timeout
        while len(self.deliveries) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.deliveries


@pytest.fixture
def receiver(serve) -> Receiver:
    return Receiver(serve)
