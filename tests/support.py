"""Helpers shared by the tests: live servers, a sandbox handle, portal configuration, sign-in."""

import atexit
import contextlib
import csv
import functools
import io
import re
import shutil
import signal
import socket
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import requests
from flask_migrate import upgrade
from sqlalchemy import make_url
from werkzeug.security import generate_password_hash
from werkzeug.serving import make_server

from flow_sandbox.settings import DEMO_WEBHOOK_SECRET
from portal.webhooks.signing import standard_headers

PASSWORD = "correct horse battery"
ALL_CREATE_SCOPES = "loan-application:create:no loan-application:create:se loan-application:create:fi"


def closing_answers(app):
    """`app` whose answers are closed even when werkzeug's server does not close them.

    When a client drops the connection in the middle of an answer (a browser leaving a page while its favicon is
    sent), werkzeug's drain of the socket raises before it calls the answer's close(): the file being sent is left
    to the garbage collector, whose ResourceWarning then fails whichever test is running. A generator's finally
    runs when the generator is collected, so the file is closed first.
    """

    def answered(environ, start_response):
        answer = app(environ, start_response)
        try:
            yield from answer
        finally:
            if hasattr(answer, "close"):
                answer.close()

    return answered


class LiveServer:
    """A WSGI app served by werkzeug on a free 127.0.0.1 port, in a thread."""

    def __init__(self, app):
        self.app = app
        self.server = make_server("127.0.0.1", 0, closing_answers(app), threaded=True)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


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

    def answered(self, url: str) -> int:
        """Deliveries to `url` answered 2xx. The portal answers one only after its event is stored and handed to
        the index writer, so a flush after these were counted has them (the stored rows alone come too early)."""
        return sum(1 for entry in self.deliveries() if entry.get("ok") and entry["url"] == url)


# Redis keys of this test run only: two runs on one machine never see each other's counts.
REDIS_PREFIX = f"flow-portal-test-{uuid.uuid4().hex[:12]}"


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
        # Past what a loaded machine stalls for: with two runs at once a token took 9 s (a test that times out sets
        # its own, shorter one).
        "FLOW_READ_TIMEOUT": "15",
        "PORTAL_SECRET_KEY": "test-secret-key-0123456789",
        "PORTAL_INDEX_KEY": "test-index-key-0123456789",
        "PORTAL_DATABASE_URL": database,
        "PORTAL_PUBLIC_URL": "http://127.0.0.1:5000",
        "PORTAL_REDIS_PREFIX": REDIS_PREFIX,
        "RATELIMIT_ENABLED": False,
    } | overrides


def production_settings(**overrides) -> dict:
    """Settings a production portal starts with: fresh random secrets, a client that is not the sandbox's demo."""
    import base64
    import secrets

    return {
        "FLOW_ENVIRONMENT": "production",
        "FLOW_CLIENT_ID": "lender-client",
        "FLOW_CLIENT_SECRET": secrets.token_urlsafe(32),
        "FLOW_WEBHOOK_SECRETS": "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode(),
        "PORTAL_SECRET_KEY": secrets.token_urlsafe(48),
        "PORTAL_INDEX_KEY": secrets.token_urlsafe(48),
        "PORTAL_WORKERS": "1",  # else production wants Redis for shared sign-in throttling
    } | overrides


def deliver_signed(app, payload: dict, secret: str = DEMO_WEBHOOK_SECRET, body: str | None = None):
    """Post `payload` (or the text `body`) to the portal's webhook endpoint signed as the sandbox signs (Standard
    Webhooks)."""
    import json
    from datetime import datetime, timezone

    body = json.dumps(payload) if body is None else body
    message_id, moment = f"msg_{uuid.uuid4().hex}", datetime.now(timezone.utc)
    headers = standard_headers(secret, message_id, moment, body) | {"content-type": "application/json"}
    return app.test_client().post("/webhooks/flow", data=body, headers=headers)


def wait_until(condition, what: str, seconds: float = 15):
    """Poll `condition()` until it gives something true (returned), failing with `what` at the deadline."""
    deadline = time.monotonic() + seconds
    while not (found := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return found


@contextlib.contextmanager
def signals_aimed_at(thread: threading.Thread):
    """Interrupt `thread`'s waits with signals (SIGUSR1, handled by doing nothing) while the block runs: what a
    SIGTERM landing on one of a worker's background threads does when gunicorn stops it.

    The do-nothing handler stays installed afterwards: the last signal may reach a thread that is not running
    only after the block, and SIGUSR1's default action ends the process (an xdist worker died of it once)."""
    signal.signal(signal.SIGUSR1, _do_nothing)
    done = threading.Event()

    def aim():
        while True:  # a signal every 0.2 ms: one lands in the moment that matters within a few dozen waits
            signal.pthread_kill(thread.ident, signal.SIGUSR1)
            if done.wait(0.0002):
                return

    aimer = threading.Thread(target=aim, daemon=True)
    aimer.start()
    try:
        yield
    finally:
        done.set()
        aimer.join()


def _do_nothing(*_) -> None:
    pass


class Clock:
    """A clock a test moves: `now` seconds, `sleep` advances it instead of waiting and remembers each wait.

    Called, it gives `now`: pass it where the code takes a clock (the token provider, the transport, the
    sandbox's identity provider: there start it at `time.time()`).
    """

    def __init__(self, now: float = 1000.0):
        self.now = now
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@functools.cache
def quick_password_hash(password: str = PASSWORD) -> str:
    """A stored hash of `password` that checks in a millisecond. The portal makes scrypt hashes (0.14 s to make and
    as long to check: over a thousand sign-ins made that a sixth of the suite); it checks any method werkzeug
    knows, so signing in is the same. Tests of the portal's own hashing set passwords the portal's way."""
    return generate_password_hash(password, method="pbkdf2:sha256:1000")


def migrated(app):
    """`app` with its database at the newest schema. A new SQLite file is a copy of one this process migrated once
    (migrating takes a quarter of a second, copying a millisecond); anything else is upgraded in place."""
    url = make_url(app.config["SQLALCHEMY_DATABASE_URI"])
    if url.get_backend_name() == "sqlite" and url.database and not Path(url.database).exists():
        shutil.copyfile(migrated_sqlite_template(), url.database)
        return app
    with app.app_context():
        upgrade()
    return app


@functools.cache
def migrated_sqlite_template() -> str:
    """A SQLite file migrated to the newest schema, made once per test process and removed at its end."""
    from portal import create_app
    from portal.extensions import db

    folder = tempfile.mkdtemp(prefix="portal-schema-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / "template.db"
    app = create_app(portal_config("http://127.0.0.1:9", f"sqlite:///{path}"))
    with app.app_context():
        upgrade()
        db.engine.dispose()  # the last connection closed: the write-ahead log is checkpointed into the file
    app.extensions["flow_index"].close()
    return str(path)


def set_account_language(app, username: str, language: str) -> None:
    """Give an account a chosen language, as choosing it at the foot of a page does."""
    from portal.extensions import db
    from portal.models import User

    with app.app_context():
        db.session.query(User).filter_by(username=username).one().language = language
        db.session.commit()


def sign_in(client, username: str, password: str = PASSWORD, next_url: str = ""):
    return client.post("/login", data={"username": username, "password": password, "next": next_url})


def add_user(app, username: str | None = None, role: str = "viewer", password: str = PASSWORD, **fields) -> str:
    """A staff account in `app`'s database whose password checks in a millisecond (named after its role when no name
    is given); returns its username."""
    from portal.extensions import db
    from portal.models import User

    username = username or f"{role}-{uuid.uuid4().hex[:8]}"
    with app.app_context():
        user = User(username=username, role=role, **fields)
        user.password_hash = quick_password_hash(password)
        db.session.add(user)
        db.session.commit()
    return username


def signed_in_as(app, username: str | None = None, role: str = "viewer"):
    """A test client of `app` signed in as a new account (`add_user`)."""
    client = app.test_client()
    answer = sign_in(client, add_user(app, username, role))
    assert answer.status_code == 302, answer.text
    return client


class Receiver:
    """A stand-in webhook endpoint that records every delivery and answers `status`.

    Clear `open` to hold every delivery at the door until it is set again (a slow receiver).
    """

    def __init__(self, serve):
        from flask import Flask, request

        self.deliveries: list[dict] = []
        self.status = 204
        self.open = threading.Event()
        self.open.set()
        app = Flask("receiver")

        @app.post("/hooks")
        def hook():
            self.open.wait(30)
            self.deliveries.append({"headers": dict(request.headers), "body": request.get_data()})
            return "", self.status

        self.url = serve(app) + "/hooks"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.deliveries) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.deliveries


def jwt_settings(client_key, **overrides) -> dict:
    """Portal settings for the self-signed JWT mode with the test session's key."""
    return {
        "FLOW_AUTH_MODE": "self_signed_jwt",
        "FLOW_JWT_PRIVATE_KEY": str(client_key.private_pem),
        "FLOW_JWT_KID": client_key.kid,
        "FLOW_JWT_ISSUER": "lender",
        "FLOW_JWT_AUDIENCE": "flow-sandbox",
    } | overrides


def run_in_threads(work, count: int) -> list[Exception]:
    """Run `work` in `count` threads started together; the exceptions they raised."""
    barrier, errors = threading.Barrier(count), []

    def run():
        barrier.wait()
        try:
            work()
        except Exception as error:  # collected for the caller's assertion
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def migrate_postgres(url: str) -> None:
    """Bring the PostgreSQL database at `url` to the newest schema (it becomes the template of the run's databases)."""
    from portal import create_app
    from portal.extensions import db

    app = create_app(portal_config("http://127.0.0.1:9", url))
    with app.app_context():
        upgrade()
        db.engine.dispose()  # a template must have no connections when it is copied
    app.extensions["flow_index"].close()


def empty_postgres(url: str) -> str:
    """Drop everything in the public schema, so each run starts from an empty database."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    engine.dispose()
    return url


def create_database_beside(url: str, name: str, template: str | None = None) -> str:
    """Create database `name` on the server of `url`, empty or a copy of `template` (copying a migrated database
    takes about 60 ms, migrating 450 ms); its URL."""
    from sqlalchemy import create_engine, text

    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    admin.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def drop_database(url: str, name: str) -> None:
    from sqlalchemy import create_engine, text

    admin = create_engine(url, isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


# What a test could change in a database's schema: relations and their columns, defaults, constraints, indexes,
# triggers, functions and the Alembic revision. Equal to the template's, the database can be emptied and reused.
SCHEMA_FINGERPRINT = """
SELECT md5(string_agg(part, '|' ORDER BY part)) FROM (
    SELECT concat_ws(':', 'r', c.relname, c.relkind::text, a.attname, format_type(a.atttypid, a.atttypmod),
        a.attnotnull::text, pg_get_expr(d.adbin, d.adrelid)) AS part
    FROM pg_class c
    LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
    LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
    WHERE c.relnamespace = 'public'::regnamespace
    UNION ALL SELECT concat_ws(':', 'k', conname, pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace = 'public'::regnamespace
    UNION ALL SELECT concat_ws(':', 'i', indexdef) FROM pg_indexes WHERE schemaname = 'public'
    UNION ALL SELECT concat_ws(':', 't', tgname) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
    WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
    UNION ALL SELECT concat_ws(':', 'f', proname) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
    UNION ALL SELECT concat_ws(':', 'v', version_num) FROM alembic_version
) parts
"""


class PostgresDatabases:
    """A test process's PostgreSQL databases, each a copy of the run's migrated template.

    A database a test is done with is emptied for the next one instead of dropped: deleting the rows of a few
    small tables takes about 15 ms, dropping a database and copying the template again about 0.25 s of the
    server's CPU, a tenth of the suite's. It is emptied when the next test asks for it, after every fixture of
    the test that used it has been torn down; its connections are ended first, and one whose schema is no
    longer the template's (a downgrade, a trigger) is dropped instead.
    """

    def __init__(self, template_url: str):
        from sqlalchemy import MetaData, create_engine, text

        self.template_url = template_url
        engine = create_engine(template_url)
        with engine.connect() as connection:
            self.schema = connection.execute(text(SCHEMA_FINGERPRINT)).scalar_one()
            sequences = connection.execute(text("SELECT sequencename FROM pg_sequences WHERE schemaname = 'public'"))
            self.sequences = sequences.scalars().all()
        tables = MetaData()
        tables.reflect(bind=engine)
        engine.dispose()
        self.tables_children_first = [table.name for table in reversed(tables.sorted_tables)]
        self.tables_children_first.remove("alembic_version")
        self.made: list[str] = []
        self.returned: list[str] = []

    def take(self) -> str:
        while self.returned:
            url = self.returned.pop()
            if self._emptied(url):
                return url
            self._drop(url)
        template = make_url(self.template_url).database
        self.made.append(
            create_database_beside(self.template_url, f"{template}_{uuid.uuid4().hex[:8]}", template=template)
        )
        return self.made[-1]

    def give_back(self, url: str) -> None:
        self.returned.append(url)

    def drop_all(self) -> None:
        for url in list(self.made):
            self._drop(url)

    def _drop(self, url: str) -> None:
        drop_database(self.template_url, make_url(url).database)
        self.made.remove(url)

    def _emptied(self, url: str) -> bool:
        from sqlalchemy import create_engine, text
        from sqlalchemy.exc import SQLAlchemyError
        from sqlalchemy.pool import NullPool

        engine = create_engine(url, poolclass=NullPool, isolation_level="AUTOCOMMIT")
        others = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        try:
            with engine.connect() as connection:
                connection.execute(text(f"SELECT pg_terminate_backend(pid) {others}"))
                wait_until(lambda: connection.execute(text(f"SELECT count(*) = 0 {others}")).scalar(), "ended sessions")
                if connection.execute(text(SCHEMA_FINGERPRINT)).scalar() != self.schema:
                    return False
            with engine.execution_options(isolation_level="READ COMMITTED").begin() as connection:
                for table in self.tables_children_first:
                    connection.execute(text(f'DELETE FROM "{table}"'))
                for sequence in self.sequences:
                    connection.execute(text(f'ALTER SEQUENCE "{sequence}" RESTART'))
            return True
        except SQLAlchemyError:  # its schema is gone far enough that the fingerprint cannot even be read
            return False
        finally:
            engine.dispose()


def service_missing(reason: str, variable: str):
    """A peer service a test needs is not there: a failure naming the setting (`scripts/test` provides both)."""
    import pytest

    pytest.fail(f"{reason}: run scripts/test, which starts it, or set {variable}")


def submission_token(page) -> str:
    """The one-time submission token a freshly opened create form carries."""
    return re.search(r'name="submission" type="hidden" value="([^"]+)"', page.text)[1]


def form_data(client, **changes) -> dict:
    """A filled-in create form, with the submission token of a freshly opened one."""
    page = client.get("/flows/new")
    assert page.status_code == 200, page.status_code
    return {
        "country": "no",
        "national_id": "15108695088",
        "last_name": "Nordmann",
        "redirect_url": "https://lender.example/done",
        "webhook_url": "",
        "submission": submission_token(page),
        "real_person": "y",  # a real-looking number in the test environment: the person agreed (the guardrail)
        "another_flow": "y",  # tests create many flows for one person: no stop to ask about the ones still open
    } | changes


def create_form(client, **changes):
    return client.post("/flows/new", data=form_data(client, **changes))


def spreadsheet_rows(text: str, delimiter: str = ",") -> list[dict]:
    """A page's CSV download read as a script would: it starts with a byte-order mark (for Excel), then rows of
    cells separated by `delimiter` (a comma on an English page)."""
    assert text.startswith("\ufeff"), "a page's CSV download starts with a byte-order mark"
    return list(csv.DictReader(io.StringIO(text.removeprefix("\ufeff")), delimiter=delimiter))


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked in recv or accept on it
    sock.close()


class DatabaseProxy:  # a database, Redis: any TCP server
    """A TCP stand-in on 127.0.0.1 whose mode a test switches.

    up: forwards to `target`; down: nothing listens on the port; hang: accepts and never answers.
    Every switch drops the open connections, as a database restart would.
    """

    def __init__(self, target: tuple[str, int] | None, mode: str = "up"):
        self.target, self.mode, self.port = target, mode, 0
        self.lock = threading.Lock()
        self.connections: list[socket.socket] = []
        self.accepted = 0
        self.listener: socket.socket | None = None
        self._listen()

    def _listen(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(128)
        self.port, self.listener = listener.getsockname()[1], listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
                self.connections.append(client)
                if self.mode == "hang":
                    continue  # hold it open and say nothing
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
                self.connections.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)

    def url(self, database_url: str) -> str:
        return make_url(database_url).set(host="127.0.0.1", port=self.port).render_as_string(hide_password=False)

    def switch(self, mode: str) -> None:
        with self.lock:
            self.mode = mode
            self._drop_connections()
            if mode == "down" and self.listener:
                _close(self.listener)
                self.listener = None
            elif mode != "down" and not self.listener:
                self._listen()

    def _drop_connections(self) -> None:
        for connection in self.connections:
            _close(connection)
        self.connections.clear()

    def stop(self) -> None:
        with self.lock:
            self._drop_connections()
            if self.listener:
                _close(self.listener)
                self.listener = None
