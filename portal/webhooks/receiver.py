"""The webhook endpoint: verify the raw body, then store the event, then answer 2xx.

No sign-in and no CSRF here (the signature is the authentication); nothing else is exempt.
"""

import json
import re
import threading
import time
from datetime import datetime, timedelta, timezone

from flask import Blueprint, current_app, jsonify, request
from werkzeug.exceptions import RequestEntityTooLarge

from .. import metrics
from ..extensions import csrf
from ..flowindex.feed import saw_event
from ..throttle import REJECTED_DELIVERIES_PER_NETWORK, ThrottleUnavailable, client_address, network_of, throttle
from .diagnosis import Delivery, Diagnosis, diagnose
from .schemes import DeliveryRejected, signature_headers, verify_delivery
from .shape import EventShape, read_event
from .store import (
    body_seen_before,
    event_id_for,
    record_event,
    record_rejection,
    storable_moment,
    stored_body,
    tally_rejection,
    was_pruned,
)

KEPT_HEADERS = ("webhook-id", "webhook-timestamp", "user-agent", "content-type")
MAX_DEPTH = 64
_JSON_TOKEN = re.compile(rb'\\.|["\[\]{}]', re.DOTALL)  # an escape, a quote or a bracket; never backtracks


def make_blueprint(path: str) -> Blueprint:
    bp = Blueprint("webhooks", __name__)
    bp.add_url_rule(path, view_func=receive, methods=["POST"])
    bp.record_once(
        lambda state: state.app.extensions.setdefault("webhooks.rejection_log", _PerMinute(LOGGED_PER_MINUTE))
    )
    bp.record_once(
        lambda state: state.app.extensions.setdefault("webhooks.diagnoses", _PerMinute(DIAGNOSED_PER_MINUTE))
    )
    csrf.exempt(receive)
    return bp


def _answer(http_status: int, body: dict):
    return jsonify(body), http_status


def _reject(status: int, public: str, kind: str, reason: str, body_head: bytes = b""):
    """Count the rejection; keep a sample and log it unless this address's network has sent too many lately."""
    settings = current_app.extensions["portal.settings"]
    address = client_address()
    network = network_of(address)
    tally_rejection(kind, network, reason)
    try:
        verdict = throttle().attempt("webhook-rejected", REJECTED_DELIVERIES_PER_NETWORK, network)
    except ThrottleUnavailable:
        metrics.count_webhook("rejected", kind)
        return _answer(status, {"error": public})  # counted above; no sample while the limit cannot be checked
    metrics.count_webhook("rejected", kind if verdict.allowed else "rate_limited")
    if not verdict.allowed:
        # Counted, but neither kept nor logged: a flood cannot push out evidence or fill the log.
        response = _answer(429, {"error": "too many rejected deliveries"})
        response[0].headers["Retry-After"] = str(verdict.retry_after)
        return response
    headers = signature_headers(request.headers, settings.webhook_scheme, settings.webhook_header)
    diagnosis = _diagnosis(settings, kind, body_head)
    record_rejection(reason, address, network, headers, body_head, settings.rejected_keep, diagnosis)
    _log_rejection(address, reason, diagnosis.code)
    return _answer(status, {"error": public})


def _diagnosis(settings, kind: str, body: bytes) -> Diagnosis:
    """Why the delivery was refused, worked out only for a kept sample; a fault here never turns a 4xx into a 500."""
    delivery = Delivery(
        body=body,
        headers=request.headers,
        scheme=settings.webhook_scheme,
        secrets=settings.webhook_secrets,
        retired=settings.webhook_retired_secrets,
        hmac_header=settings.webhook_header,
        id_header=settings.webhook_id_header,
        now=current_app.extensions["portal.clock"](),
        stored_body=stored_body,
    )
    allowed, _ = current_app.extensions["webhooks.diagnoses"].take()
    if not allowed:
        # Samples are limited per network, not in all: many networks must not buy unbounded HMAC work.
        return Diagnosis("undiagnosed", f"more than {DIAGNOSED_PER_MINUTE} rejections this minute: not diagnosed")
    try:
        return diagnose(delivery, kind)
    except Exception as error:  # the rejection stands whatever the diagnosis does; only the type is logged
        current_app.logger.warning("webhook rejection not diagnosed: %s", type(error).__name__)
        return Diagnosis("undiagnosed", f"the diagnosis failed ({type(error).__name__}); the reason still holds")


def _log_rejection(address: str, reason: str, diagnosis: str) -> None:
    """One warning per rejection, at most LOGGED_PER_MINUTE a minute whatever the number of networks."""
    allowed, suppressed = current_app.extensions["webhooks.rejection_log"].take()
    if suppressed:
        current_app.logger.warning("%d more webhook rejections in the previous minute were not logged", suppressed)
    if allowed:
        current_app.logger.warning("webhook rejected from %r: %r (diagnosis %s)", address, reason, diagnosis)


class _PerMinute:
    """A budget of `limit` events a minute in this process; says how many the last minute went without."""

    def __init__(self, limit: int, clock=time.monotonic):
        self.limit, self.clock = limit, clock
        self.minute, self.used, self.over = -1, 0, 0
        self.lock = threading.Lock()

    def take(self) -> tuple[bool, int]:
        with self.lock:
            minute, reported = int(self.clock() // 60), 0
            if minute != self.minute:
                self.minute, self.used, reported, self.over = minute, 0, self.over, 0
            self.used += 1
            if self.used > self.limit:
                self.over += 1
            return self.used <= self.limit, reported


LOGGED_PER_MINUTE = 60
DIAGNOSED_PER_MINUTE = 60  # a diagnosis tries a few dozen HMACs: at most a few seconds of CPU a minute


def _read_body(limit: int) -> bytes | None:
    """The raw body, or None when it is over `limit` bytes, however it is sent (Content-Length or chunked)."""
    if (request.content_length or 0) > limit:
        return None
    chunks, size = [], 0
    try:
        while chunk := request.stream.read(64 * 1024):
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
    except RequestEntityTooLarge:
        return None
    return b"".join(chunks)


def _too_old(settings, timestamp: str | None) -> bool:
    """An event that says it happened before the retention window: its id may have been forgotten since."""
    moment = storable_moment(timestamp)
    return moment is not None and moment < datetime.now(timezone.utc) - timedelta(days=settings.event_retention_days)


def nests_deeper_than(body: bytes, limit: int) -> bool:
    """Whether the brackets of a JSON text nest past `limit`, brackets in strings ignored; no recursion."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    in_string = False
    for match in _JSON_TOKEN.finditer(body):
        token = match.group()
        if token == b'"':
            in_string = not in_string
        elif in_string or len(token) == 2:
            continue
        elif token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def _int_or_text(digits: str):
    # Past Python's 4300-digit limit int() raises; such a number is kept as its text.
    return int(digits) if len(digits) <= 4000 else digits


def receive():
    """Take one delivery from the Flow Service."""
    settings = current_app.extensions["portal.settings"]
    body = _read_body(settings.webhook_max_bytes)  # raw bytes: re-serialised JSON would not match the signature
    if body is None:
        return _reject(
            413, "payload too large", "too_large", f"body is over the limit of {settings.webhook_max_bytes} bytes"
        )
    try:
        verified = verify_delivery(
            body,
            request.headers,
            scheme=settings.webhook_scheme,
            secrets=settings.webhook_secrets,
            hmac_header=settings.webhook_header,
        )
    except DeliveryRejected as rejected:
        return _reject(401, "invalid signature", rejected.kind, rejected.reason, body)
    if request.mimetype != "application/json":
        return _reject(
            415, "content type must be application/json", "content_type", f"content type {request.mimetype!r}", body
        )
    if nests_deeper_than(body, MAX_DEPTH):
        return _reject(400, "JSON nested too deep", "too_deep", f"JSON nested deeper than {MAX_DEPTH} levels", body)
    try:
        payload = json.loads(body.decode("utf-8"), parse_int=_int_or_text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
        return _reject(400, "malformed JSON", "malformed", "body is not valid UTF-8 JSON", body)
    if not isinstance(payload, dict):
        return _reject(400, "the event must be a JSON object", "not_object", "body is not a JSON object", body)
    fields = read_event(payload, EventShape(settings.webhook_shape, settings.webhook_fields))
    # Standard Webhooks always signs an id; hmac-sha256 senders may put one in a header, the body, or nowhere.
    given_ids = [verified.message_id, request.headers.get(settings.webhook_id_header), fields.event_id]
    event_id = event_id_for(given_ids, body)
    if was_pruned(event_id) or (verified.scheme == "hmac-sha256" and body_seen_before(body)):
        # Stored once (perhaps removed by retention since), or, under hmac-sha256 where no id or time is
        # signed, the same signed bytes again with another id header: a replay, never a new event.
        metrics.count_webhook("duplicate")
        return _answer(200, {"status": "duplicate", "id": event_id})
    if verified.scheme == "hmac-sha256" and _too_old(settings, fields.timestamp):
        # hmac-sha256 signs no time: an old event may be a replay of one whose id is long forgotten.
        return _reject(
            400,
            "event older than the retention window",
            "stale_event",
            "event time is before the retention window",
            body,
        )
    stored = record_event(verified, event_id, fields, body, _kept_headers(settings), client_address())
    if stored:
        saw_event(fields, payload)
    metrics.count_webhook("stored" if stored else "duplicate")
    return _answer(200, {"status": "stored" if stored else "duplicate", "id": event_id})


def _kept_headers(settings) -> dict:
    names = (*KEPT_HEADERS, settings.webhook_id_header.lower())
    return {name: request.headers[name] for name in names if name in request.headers}
