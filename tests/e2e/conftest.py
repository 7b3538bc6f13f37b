"""Browser tests: Debian's Chromium driven by Playwright against a live portal and sandbox."""

import threading
from pathlib import Path

import pytest
from support import migrated, portal_config, quick_password_hash
from werkzeug.serving import make_server

from flow_sandbox import create_app as create_sandbox
from portal import create_app
from portal.extensions import db
from portal.models import User

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
OFFLINE_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1, EXCLUDE localhost",
]


def pytest_collection_modifyitems(items):
    for item in items:
        if "/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test does)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": OFFLINE_ARGS}


class Deferred:
    """A WSGI app filled in after the server has its port (the portal must know its own URL)."""

    app = None

    def __call__(self, environ, start_response):
        return self.app(environ, start_response)


def serve_deferred():
    holder = Deferred()
    server = make_server("127.0.0.1", 0, holder, threaded=True)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return holder, server, f"http://127.0.0.1:{server.server_port}"


class Stack:
    """A sandbox seeded with flows and a portal whose webhook URL the sandbox can reach."""

    def __init__(self, tmp_path):
        sandbox_holder, self.sandbox_server, self.sandbox_url = serve_deferred()
        sandbox_holder.app = self.sandbox_app = create_sandbox(
            {"SANDBOX_SEED": "40", "SANDBOX_WEBHOOK_BACKOFF": "0.05"}
        )
        portal_holder, self.portal_server, self.url = serve_deferred()
        config = portal_config(
            self.sandbox_url, f"sqlite:///{tmp_path / 'portal.db'}", PORTAL_PUBLIC_URL=self.url, RATELIMIT_ENABLED=True
        )
        config.pop("TESTING")
        config["PORTAL_SECRET_KEY"] = "e2e-secret-key-0123456789"
        config["PORTAL_INDEX_KEY"] = "e2e-index-key-0123456789"
        portal_holder.app = self.portal_app = migrated(create_app(config))
        with self.portal_app.app_context():
            for role in ("admin", "operator", "viewer"):
                user = User(username=role, role=role)
                user.password_hash = quick_password_hash()
                db.session.add(user)
            db.session.commit()

    def stop(self):
        for server in (self.portal_server, self.sandbox_server):
            server.shutdown()
            server.server_close()
        self.sandbox_app.extensions["flow_sandbox"].sender.close()
        with self.portal_app.app_context():
            db.engine.dispose()


@pytest.fixture
def stack(tmp_path):
    running = Stack(tmp_path)
    yield running
    running.stop()


@pytest.fixture
def shot(page):
    """Save a screenshot of the current page into the git-ignored test-artifacts folder."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> Path:
        path = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


@pytest.fixture
def console_errors(page):
    """Console errors and warnings (a CSP violation, a header the browser cannot read) collected during the test."""
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors
