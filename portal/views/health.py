"""Health checks for load balancers and metrics for Prometheus."""

import functools
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

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
T = TypeVar("T")
TOKEN_CHECK = "portal.token_check"
THROTTLE_CHECK = "portal.throttle_check"


class CachedCheck:
    """A check's answer, worked out again at most every `seconds`: a probe asking every second costs one check, and
    one that waits on a timeout while what it checks is away does not wait on each call."""

    def __init__(self, seconds: float = 5.0, clock=time.monotonic):
        self.seconds, self.clock = seconds, clock
        self._lock = threading.Lock()
        self._until = float("-inf")
        self._answer: Any = None

    def answer(self, check: Callable[[], T]) -> T:
        with self._lock:
            if self.clock() >= self._until:
                self._answer = check()
                self._until = self.clock() + self.seconds
            return self._answer


def _token_failure(provider) -> str | None:
    try:
        provider.token()  # never shown: only whether it came
    except FlowApiError as error:
        return outcome_kind(error)
    return None


@bp.record_once
def _create_checks(state) -> None:
    for name in (TOKEN_CHECK, THROTTLE_CHECK):
        state.app.extensions.setdefault(name, CachedCheck())


@bp.get("/healthz")
def live():
    """The process is up; never touches the database, so it answers while the database hangs."""
    return {"status": "ok"}


@bp.get("/readyz")
def ready():
    """The process can reach its database, which is migrated to this code's schema, and obtain a Flow Service
    token. A shared sign-in throttling store (Redis) is reported, not required: while it is away sign-ins and
    searches by national id are refused with a page saying so, but signed-in staff go on working."""
    checks = current_app.extensions
    body = {"status": "ok", "database": _database_state(), "token": "ok"}
    if throttle().shared:
        body["throttle"] = checks[THROTTLE_CHECK].answer(_throttle_state)
    provider = current.flow_client().provider
    failure = checks[TOKEN_CHECK].answer(lambda: _token_failure(provider))
    if failure:
        body |= {"token": "unavailable", "token_error": failure}
    if failure or body["database"] != "ok":
        return body | {"status": "unavailable"}, 503
    return body


def _throttle_state() -> str:
    return "ok" if throttle().reachable() else "unreachable"


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
