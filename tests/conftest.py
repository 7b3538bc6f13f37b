"""Shared fixtures: live servers on 127.0.0.1, the sandbox, the portal app, users, databases."""

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from altservice import AltOptions, AltService, create_alt_service
from joserfc.jwk import RSAKey
from sqlalchemy import make_url
from support import (
    REDIS_PREFIX,
    DatabaseProxy,
    LiveServer,
    PostgresDatabases,
    Receiver,
    Sandbox,
    add_user,
    create_database_beside,
    drop_database,
    migrate_postgres,
    migrated,
    portal_config,
    service_missing,
    sign_in,
)

from flow_sandbox import create_app as create_sandbox
from portal import create_app
from portal.extensions import db
from portal.models import User


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


@pytest.fixture(scope="session")
def postgres_run_url() -> str | None:
    """A PostgreSQL database of this test run's own, beside the configured one, migrated once: the template every
    test's database is copied from. Dropped at the end.

    Two runs on one machine (or a helper's run beside CI) never empty each other's tables.
    """
    url = os.environ.get(POSTGRES_VARIABLE)
    if not url:
        yield None
        return
    created = create_database_beside(url, f"portal_test_{uuid.uuid4().hex[:12]}")
    migrate_postgres(created)
    yield created
    drop_database(url, make_url(created).database)


@pytest.fixture(scope="session")
def postgres_databases(postgres_run_url) -> PostgresDatabases | None:
    """This process's test databases: copies of the template, each emptied for the next test, dropped at the end."""
    if not postgres_run_url:
        yield None
        return
    databases = PostgresDatabases(postgres_run_url)
    yield databases
    databases.drop_all()


@pytest.fixture
def postgres_database(postgres_databases) -> str:
    """A PostgreSQL database the test has to itself, migrated and empty."""
    if not postgres_databases:
        service_missing("PostgreSQL is not configured", POSTGRES_VARIABLE)
    url = postgres_databases.take()
    yield url
    postgres_databases.give_back(url)


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request, tmp_path) -> str:
    """Each store test runs on SQLite and on PostgreSQL (in CI always; elsewhere when configured)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'portal.db'}"
    return request.getfixturevalue("postgres_database")


@pytest.fixture(scope="session")
def redis_run_url():
    """The test Redis; at the end, the keys this run (this process) made are removed, nothing else.

    Every key a test makes starts with the run's REDIS_PREFIX, so two runs at once never meet and never flush.
    """
    import redis

    url = os.environ.get("PORTAL_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
    yield url
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=2)
        keys = list(client.scan_iter(match=f"{REDIS_PREFIX}*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass  # the server went away: there is nothing left to remove from it


@pytest.fixture
def redis_url(redis_run_url) -> str:
    """A reachable Redis (default db 15 on the local server); each test uses keys under the run's prefix."""
    import redis

    try:
        redis.Redis.from_url(redis_run_url, socket_connect_timeout=2).ping()
    except redis.RedisError:
        service_missing(f"Redis is not reachable at {redis_run_url}", "PORTAL_TEST_REDIS_URL")
    return redis_run_url


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'portal.db'}"


# -- the portal --------------------------------------------------------------------------------


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
        app.extensions["flow_index"].close()
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
        return add_user(app, username or default, role, disabled=disabled)

    return create


@pytest.fixture
def signed_in(app, make_user):
    """A new test client signed in with the given role: `signed_in("operator")`."""

    def as_role(role="viewer"):
        client = app.test_client()
        answer = sign_in(client, make_user(role))
        assert answer.status_code == 302, answer.text
        return client

    return as_role


@pytest.fixture
def receiver(serve) -> Receiver:
    return Receiver(serve)


@pytest.fixture
def alt(serve) -> AltService:
    """A fresh alternative service (23 current, 4 archived flows), served; flip switches with `alt.set(...)`."""
    app = create_alt_service(AltOptions())
    service = app.extensions["alt"]
    service.url = serve(app)
    return service


@pytest.fixture
def hanging_server():
    """A server on 127.0.0.1 that accepts every connection and never sends a byte."""
    server = DatabaseProxy(None, mode="hang")
    yield server
    server.stop()
