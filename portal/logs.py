"""Logs: one JSON object per line, the request id on every line of a request, one access line per request.

Every text is masked (`mask_text`) before it is written, and JSON's escaping keeps a CR/LF sent by a
client or the Flow Service inside its own line: nothing from outside can forge a log line.
"""

import json
import logging
import sys
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from flask import Flask, g, request
from flask.logging import default_handler

from . import metrics, news, requestid
from .masking import mask_text

# What every LogRecord has; any other attribute came as `extra=` and is written as a field of its own.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}
_WERKZEUG_REQUEST_LINE = '] "%s" %s %s'  # how werkzeug's own per-request line ends; it holds the query string

access_log = logging.getLogger("portal.access")
# Read by gunicorn.conf.py: the server's access line of a request marked so (a stored webhook delivery, a page's
# answered question in the background) is written at DEBUG only, as the portal's own.
QUIET_ACCESS = "portal.quiet_access"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC), level, logger, message, request_id in a request, extra fields."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            **self.content(record),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps({key: _masked(value) for key, value in entry.items()})

    def content(self, record: logging.LogRecord) -> dict:
        """The message, the request id and the record's extra fields."""
        fields = {"message": record.getMessage(), "request_id": requestid.current()}
        fields.update((key, value) for key, value in vars(record).items() if key not in _STANDARD)
        return {key: value for key, value in fields.items() if value is not None}


class GunicornAccessFormatter(JsonFormatter):
    """gunicorn's access lines as JSON fields: the path without its query string, never the request line."""

    def content(self, record: logging.LogRecord) -> dict:
        atoms: Mapping[str, Any] = record.args if isinstance(record.args, Mapping) else {}  # gunicorn's atoms
        method, path, status = atoms.get("m"), atoms.get("U"), atoms.get("s")
        fields = {
            "message": f"{method} {path} {status}",
            "method": method,
            "path": path,
            "status": int(str(status)) if str(status).isdigit() else status,
            "bytes": atoms.get("B"),
            "duration_ms": round(atoms.get("D", 0) / 1000, 1),
            "remote_addr": atoms.get("h"),
            "request_id": atoms.get("{x-request-id}o"),  # the portal's answer carries it
        }
        return {key: value for key, value in fields.items() if value is not None}


def _masked(value):
    if value is None or isinstance(value, bool | int | float):
        return value
    return mask_text(value if isinstance(value, str) else str(value))


def init_app(app: Flask, level: str) -> None:
    """Configure logging and time, count and log every request under its request id.

    Call before anything else registers a `before_request` hook: one that answers (the sign-in
    redirect) skips the hooks registered after it.
    """
    configure_logging(app, level)
    app.before_request(_begin_request)
    app.after_request(_finish_request)
    app.teardown_request(_end_request)


def configure_logging(app: Flask, level: str) -> None:
    """The "portal" logger at `level`; JSON lines on stderr unless logging is set up already (gunicorn, pytest)."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonFormatter())
        root.addHandler(handler)
        logging.getLogger("werkzeug").addFilter(_not_a_request_line)
    if not app.testing:
        logging.captureWarnings(True)  # a library's warning is a log line too, not a bare line on stderr
        _skip_what_no_line_shows()
    app.logger.removeHandler(default_handler)
    app.logger.setLevel(level)


def _skip_what_no_line_shows() -> None:
    """No line the portal writes names a source file, a thread or a process, so LogRecords need not find them
    (the logging HOWTO's "Optimization": a stack walk and look-ups on every line, two lines a page). Left on in
    tests, whose own log output names file and line."""
    logging._srcfile = None  # named in the HOWTO
    logging.logThreads = False
    logging.logProcesses = False
    logging.logMultiprocessing = False


def _not_a_request_line(record: logging.LogRecord) -> bool:
    """The development server's own request line carries the query string; the portal's access line replaces it."""
    return not (isinstance(record.msg, str) and record.msg.endswith(_WERKZEUG_REQUEST_LINE))


def gunicorn_logconfig_dict() -> dict:
    """gunicorn's `logconfig_dict`: its error log and the portal's lines on stderr, its access log on stdout, all JSON.

    gunicorn's own `loglevel` still sets the level of its error log.
    """
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}, "access": {"()": GunicornAccessFormatter}},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"},
            "access": {"class": "logging.StreamHandler", "formatter": "access", "stream": "ext://sys.stdout"},
        },
        "root": {"level": "WARNING", "handlers": ["stderr"]},
        "loggers": {
            "gunicorn.error": {"handlers": ["stderr"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["access"], "propagate": False},
        },
    }


def _begin_request() -> None:
    g.request_id = requestid.begin(request.headers.get(requestid.HEADER))
    g.request_started = time.perf_counter()


def _finish_request(response):
    started = g.get("request_started")
    if started is None:  # the request failed before the first hook
        return response
    response.headers[requestid.HEADER] = g.request_id
    asked_by_a_page = request.endpoint in news.BACKGROUND_ENDPOINTS and response.status_code < 400
    if asked_by_a_page:  # gunicorn's own access line too: every open page asks every 15 s
        request.environ[QUIET_ACCESS] = True
    log_request(
        logging.DEBUG if asked_by_a_page else logging.INFO,
        method=request.method,
        path=request.path,
        endpoint=request.endpoint,
        status=response.status_code,
        seconds=time.perf_counter() - started,
        user_id=_user_id(),
        remote_addr=request.remote_addr,
    )
    return response


def log_request(level: int, *, method, path, endpoint, status, seconds, user_id, remote_addr) -> None:
    """Count an answered request and write its access line (in the request id's context)."""
    metrics.observe_request(endpoint, status, seconds)
    if not access_log.isEnabledFor(level):
        return
    access_log.log(
        level,
        "%s %r %s",
        method,
        path,
        status,
        extra={
            "method": method,
            "path": path,  # never the query string: a search may carry a national id
            "endpoint": endpoint or "unmatched",
            "status": status,
            "duration_ms": round(seconds * 1000, 1),
            "user_id": user_id,
            "remote_addr": remote_addr,
            "request_id": requestid.current(),
        },
    )


def _end_request(_error) -> None:
    requestid.end()


def _user_id() -> str | None:
    """The signed-in user's id, read from what Flask-Login loaded: never a database query just for the log."""
    user_id = getattr(g.get("_login_user"), "id", None)
    return str(user_id) if user_id is not None else None
