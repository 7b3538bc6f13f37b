"""Health checks for load balancers and metrics for Prometheus."""

import functools
import threading
import time

from alembic.script import ScriptDirectory
from flask import Blueprint, Response, abort, current_app, request
from sqlalchemy import text

from .. import current, metrics
from ..database import MIGRATIONS, mark_unavailable
from ..extensions import db
from ..flowapi import FlowApiError
from ..flowapi.errors import outcome_kind
from ..throttle import throttle

bp = Blueprint("health", __name__)
TOKEN_CHECK = "portal.token_check"


class TokenCheck:
    """Whether a Flow Service token is obtainable, asked of the token provider at most every `seconds`."""

    def __init__(self, seconds: float = 5.0, clock=time.monotonic):
        self.seconds, self.clock = seconds, clock
        self._lock = threading.Lock()
        self._until = float("-inf")
        self._failure: str | None = None

    def failure(self, provider) -> str | None:
        """None when a token was obtained, else what kind of failure kept it (http_4xx, timeout, ...)."""
        with self._lock:
            if self.clock() >= self._until:
                self._failure = _token_failure(provider)
                self._until = self.clock() + self.seconds
            return self._failure


def _token_failure(provider) -> str | None:
    try:
        provider.token()  # never shown: only whether it came
    except FlowApiError as error:
        return outcome_kind(error)
    return None


@bp.record_once
def _create_token_check(state) -> None:
    state.app.extensions.setdefault(TOKEN_CHECK, TokenCheck())


@bp.get("/healthz")
def live():
    """The process is up; never touches the database, so it answers while the database hangs."""
    return {"status": "ok"}


@bp.get("/readyz")
def ready():
    """The process can reach its database, which is migrated to this code's schema, and obtain a Flow Service
    token. A shared sign-in throttling store (Redis) is reported, not required: while it is away sign-ins and
    searches by national id are refused with a page saying so, but signed-in staff go on working."""
    body = {"status": "ok", "database": _database_state(), "token": "ok"}
    if throttle().shared:
        body["throttle"] = "ok" if throttle().reachable() else "unreachable"
    failure = current_app.extensions[TOKEN_CHECK].failure(current.flow_client().provider)
    if failure:
        body |= {"token": "unavailable", "token_error": failure}
    if failure or body["database"] != "ok":
        return body | {"status": "unavailable"}, 503
    return body


def _database_state() -> str:
    try:
        db.session.execute(text("SELECT 1"))
    except Exception as error:  # any driver error means: not ready; the timeouts keep this answer quick
        mark_unavailable(error)
        return "unreachable"
    try:
        migrated = db.session.scalar(text("SELECT version_num FROM alembic_version")) == _head_revision()
    except Exception:  # no such table: a database nobody migrated
        db.session.rollback()
        migrated = False
    return "ok" if migrated else "not_migrated"


@functools.cache
def _head_revision() -> str | None:
    """The newest migration this code carries: the database must be at it (`flask --app portal db upgrade`)."""
    return ScriptDirectory(str(MIGRATIONS)).get_current_head()


@bp.get("/metrics", endpoint="metrics")
def scrape():
    """Prometheus metrics, for the allowed addresses or the bearer token; anyone else finds nothing here."""
    settings = current.settings()
    authorization = request.headers.get("Authorization")
    if not metrics.may_scrape(request.remote_addr, authorization, settings.metrics_token, settings.metrics_allow):
        abort(404)
    body, content_type = metrics.exposition()
    return Response(body, content_type=content_type)
