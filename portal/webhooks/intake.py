"""The webhook endpoint's fast lane: a WSGI layer in front of Flask that stores and answers a delivery passing
every check, without what pages need (session, sign-in, CSRF, language, throttling, an INFO line per request).

Whatever it does not take goes on to the Flask view `receiver.receive`, which decides it the same way (both
call `receiver.examine`): a refusal (the view throttles it and keeps a sample), a stale hmac-sha256 event, a
body without a Content-Length or over the limit. The answer is the view's: 200 with the status and id after
the commit that holds the event (group commit), 503 while the database is away.
"""

import io
import json
import logging
import time
from collections.abc import Iterable
from http import HTTPStatus
from typing import TYPE_CHECKING

from flask import Flask
from werkzeug.datastructures import EnvironHeaders
from werkzeug.http import parse_options_header

from .. import requestid
from ..database import is_unavailable, report_unavailable
from ..errors import DATABASE_RETRY_AFTER
from ..logs import QUIET_ACCESS, log_request
from ..settings import Settings
from .receiver import Examined, answer_body, examine, store_delivery
from .schemes import HeaderSource

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

log = logging.getLogger(__name__)
ENDPOINT = "webhooks.receive"  # counted and logged as the Flask view's deliveries are


class WebhookIntake:
    """WSGI middleware around the Flask app: the webhook path's good deliveries are answered here."""

    def __init__(self, wsgi_app: "WSGIApplication", flask_app: Flask, headers: dict[str, str]) -> None:
        self.wsgi_app = wsgi_app
        self.flask_app = flask_app
        self.settings: Settings = flask_app.extensions["portal.settings"]
        # As the Flask path's JSON answers: kept by no cache (an attack's note: the fast lane's had no Cache-Control).
        self.headers = list((headers | {"Cache-Control": "no-store"}).items())

    def __call__(self, environ: "WSGIEnvironment", start_response: "StartResponse") -> Iterable[bytes]:
        if environ.get("PATH_INFO") != self.settings.webhook_path or environ.get("REQUEST_METHOD") != "POST":
            return self.wsgi_app(environ, start_response)
        body = self._body(environ)
        if body is None:
            return self.wsgi_app(environ, start_response)
        headers = EnvironHeaders(environ)
        try:
            mimetype = parse_options_header(environ.get("CONTENT_TYPE", ""))[0].lower()  # as Flask's request.mimetype
            examined = examine(body, headers, mimetype, self.settings)
        except Exception:  # noqa: BLE001 - the view meets it again, inside Flask's error handling
            examined = None
        if not isinstance(examined, Examined) or examined.stale:
            environ["wsgi.input"] = io.BytesIO(body)  # read here: the view reads it again
            return self.wsgi_app(environ, start_response)
        started = time.perf_counter()
        request_id = requestid.begin(headers.get(requestid.HEADER))
        try:
            status, answer, extra = self._store(examined, body, headers, environ)
            log_request(
                logging.DEBUG if status == 200 else logging.INFO,  # a stored event is its own record
                method="POST",
                path=self.settings.webhook_path,
                endpoint=ENDPOINT,
                status=status,
                seconds=time.perf_counter() - started,
                user_id=None,
                remote_addr=environ.get("REMOTE_ADDR"),
            )
            environ[QUIET_ACCESS] = status == 200
            content = json.dumps(answer).encode() + b"\n"
            start_response(
                f"{status} {HTTPStatus(status).phrase}",
                [
                    ("Content-Type", "application/json"),
                    ("Content-Length", str(len(content))),
                    (requestid.HEADER, request_id),
                    *extra,
                    *self.headers,
                ],
            )
            return [content]
        finally:
            requestid.end()

    def _body(self, environ: "WSGIEnvironment") -> bytes | None:
        """The raw body when it says its length and is within the limit; else None, unread."""
        length = environ.get("CONTENT_LENGTH", "")
        if not (length.isascii() and length.isdigit()) or int(length) > self.settings.webhook_max_bytes:
            return None
        body: bytes = environ["wsgi.input"].read(int(length))
        if len(body) < int(length):  # the sender stopped short: the view answers what it reads
            environ["wsgi.input"] = io.BytesIO(body)
            return None
        return body

    def _store(
        self, examined: Examined, body: bytes, headers: HeaderSource, environ: "WSGIEnvironment"
    ) -> tuple[int, dict[str, str], list[tuple[str, str]]]:
        address = environ.get("REMOTE_ADDR") or "unknown"
        try:
            with self.flask_app.app_context():
                stored = store_delivery(examined, body, headers, address, self.settings)
        except Exception as error:
            if is_unavailable(error):
                report_unavailable(error)
                retry = [("Retry-After", str(DATABASE_RETRY_AFTER))]
                return 503, {"error": "database unavailable, retry later"}, retry
            log.exception("webhook delivery not stored")
            return 500, {"error": "internal error"}, []
        return 200, answer_body(stored, examined.event_id), []
