"""The sandbox: a faithful stand-in for the Flow Service and its identity provider.

Start it with `python -m flow_sandbox --port 8081` (or `flask --app flow_sandbox run -p 8081`):
it serves loopback clients only unless SANDBOX_ALLOW_REMOTE=1 (see `safety`). It shares nothing with
the portal but the spec and DESIGN.md, so the portal can be tested against it as against the remote service.
"""

import atexit
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from flask import Flask, jsonify, request
from werkzeug.exceptions import HTTPException

from . import api_views, control_views, faults_views, idp_views, safety
from .faults import WEBHOOKS, FaultBoard
from .identity import IdentityProvider
from .runtime import ApiError, Runtime, api_error_response
from .service import FlowService, seed_demo_flows
from .settings import DEMO_ORGANIZATION, SandboxSettingsError, load_sandbox_settings
from .state import FlowStore
from .webhooks import WebhookSender

DEMO_REDIRECT = "https://lender.example/consent-done"


def create_app(config: Mapping | None = None) -> Flask:
    """Build a sandbox; `config` replaces the environment (SANDBOX_* names) when given."""
    app = Flask(__name__)
    app.config["SECRET_KEY"] = os.urandom(32)
    app.config["SESSION_COOKIE_NAME"] = "flow_sandbox_session"
    with exit_on_settings_error():
        settings = load_sandbox_settings(config)
        app.extensions["flow_sandbox"] = _build_runtime(settings)
    safety.init_app(app)
    _register_blueprints(app)
    _register_error_handlers(app)
    _announce(settings)
    return app


@contextmanager
def exit_on_settings_error() -> Iterator[None]:
    """A bad SANDBOX_* setting stops the process with one line naming it (exit status 2)."""
    try:
        yield
    except SandboxSettingsError as error:
        print(f"sandbox: configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _build_runtime(settings) -> Runtime:
    service = FlowService(FlowStore())
    if settings.seed:
        seed_demo_flows(service, settings.seed, DEMO_ORGANIZATION, DEMO_REDIRECT)
    faults = FaultBoard()
    sender = WebhookSender(
        settings.webhook_secret,
        attempts=settings.webhook_attempts,
        backoff=settings.webhook_backoff,
        timeout=settings.webhook_timeout,
        on_exhausted=service.record_failed_delivery,
        drop=lambda: bool(faults.take(WEBHOOKS)),
    )
    atexit.register(sender.close)
    service.attach_sender(sender)
    return Runtime(settings, IdentityProvider(settings), service, sender, faults)


def _register_blueprints(app: Flask) -> None:
    for module in (idp_views, api_views, faults_views, control_views):
        app.register_blueprint(module.bp)


def _register_error_handlers(app: Flask) -> None:
    app.register_error_handler(ApiError, api_error_response)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException):
        if request.path.startswith("/consent/"):
            return f"<!doctype html><title>{error.code}</title><h1>{error.name}</h1>", error.code
        status = error.code or 500  # an HTTPException raised by Flask always has its code
        code = {404: "not_found", 405: "method_not_allowed", 413: "too_large"}.get(status, "bad_request")
        return api_error_response(ApiError(status, code, error.description or error.name))

    @app.errorhandler(Exception)
    def unexpected(error: Exception):
        app.logger.exception("sandbox: unexpected error")
        return jsonify({"error": "server_error", "message": "Internal error", "details": []}), 500


def _announce(settings) -> None:
    if settings.uses_demo_webhook_secret:
        print(f"sandbox: signing webhooks with the demo secret {settings.webhook_secret}", file=sys.stderr)
    if settings.allow_remote:
        print(
            "sandbox: SANDBOX_ALLOW_REMOTE=1: answering remote clients; remote control needs SANDBOX_CONTROL_TOKEN, "
            f"webhooks go only to SANDBOX_WEBHOOK_ALLOW ({' '.join(sorted(settings.webhook_allow)) or 'none'})",
            file=sys.stderr,
        )
