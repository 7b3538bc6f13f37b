"""The webhook endpoint: verify the raw body, then store the event, then answer 2xx.

No sign-in and no CSRF here (the signature is the authentication); nothing else is exempt.
"""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge

from .. import current, metrics
from ..extensions import csrf
from ..flowindex.feed import saw_event
from ..jsondepth import MAX_DEPTH, nests_deeper_than
from ..settings import Settings
from ..throttle import REJECTED_DELIVERIES_PER_NETWORK, ThrottleUnavailable, client_address, network_of, throttle
from .diagnosis import Delivery, Diagnosis, diagnose
from .schemes import DeliveryRejected, HeaderSource, Verified, signature_headers, verify_delivery
from .shape import EventFields, EventShape, read_event
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

Answer = tuple[Response, int]


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


def _answer(http_status: int, body: dict[str, str]) -> Answer:
    return jsonify(body), http_status


def _reject(status: int, public: str, kind: str, reason: str, body_head: bytes = b"") -> Answer:
    """Count the rejection; keep a sample and log it unless this address's network has sent too many lately."""
    settings = current.settings()
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
    record_rejection(reason, address, network, headers, body_head, settings.rejected_keep, diagnosis, kind)
    _log_rejection(address, reason, diagnosis.code)
    return _answer(status, {"error": public})


def _diagnosis(settings: Settings, kind: str, body: bytes) -> Diagnosis:
    """Why the delivery was refused, worked out only for a kept sample; a fault here never turns a 4xx into a 500."""
    delivery = Delivery(
        body=body,
        headers=request.headers,
        scheme=settings.webhook_scheme,
        secrets=settings.webhook_secrets,
        retired=settings.webhook_retired_secrets,
        hmac_header=settings.webhook_header,
        id_header=settings.webhook_id_header,
        now=current.clock()(),
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

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
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
    """The raw body, or None when it is over `limit` bytes, however it is sent (Content-Length or chunked).

    A body that ends before its Content-Length comes back short (some servers say so by ClientDisconnected).
    """
    if (request.content_length or 0) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := request.stream.read(64 * 1024):
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
    except RequestEntityTooLarge:
        return None
    except ClientDisconnected:
        pass
    return b"".join(chunks)


def _too_old(settings: Settings, timestamp: str | None) -> bool:
    """An event that says it happened before the retention window: its id may have been forgotten since."""
    moment = storable_moment(timestamp)
    return moment is not None and moment < datetime.now(timezone.utc) - timedelta(days=settings.event_retention_days)


def _int_or_text(digits: str) -> int | str:
    # Past Python's 4300-digit limit int() raises; such a number is kept as its text.
    return int(digits) if len(digits) <= 4000 else digits


@dataclass(frozen=True)
class Refusal:
    """A delivery turned away: the status and words the sender gets, and the kind and reason kept for admins."""

    status: int
    public: str
    kind: str
    reason: str


@dataclass(frozen=True)
class Examined:
    """A delivery that is signed, JSON and an object: what is stored of it."""

    verified: Verified
    fields: EventFields
    payload: dict[str, Any]
    event_id: str
    # hmac-sha256 signs no time: an event dated before the retention window may replay one whose id is forgotten.
    stale: bool


def examine(body: bytes, headers: HeaderSource, mimetype: str, settings: Settings) -> Examined | Refusal:
    """Every check of a delivery that needs no database: the signature first, then the body."""
    try:
        verified = verify_delivery(
            body,
            headers,
            scheme=settings.webhook_scheme,
            secrets=settings.webhook_secrets,
            hmac_header=settings.webhook_header,
        )
    except DeliveryRejected as rejected:
        return Refusal(401, "invalid signature", rejected.kind, rejected.reason)
    if mimetype != "application/json":
        return Refusal(415, "content type must be application/json", "content_type", f"content type {mimetype!r}")
    if nests_deeper_than(body, MAX_DEPTH):
        return Refusal(400, "JSON nested too deep", "too_deep", f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        # utf-8-sig: a leading byte-order mark skipped, as RFC 8259 allows a reader to (the client reads one too)
        payload = json.loads(body.decode("utf-8-sig"), parse_int=_int_or_text)
    except (ValueError, RecursionError):  # UnicodeDecodeError is a ValueError too
        return Refusal(400, "malformed JSON", "malformed", "body is not valid UTF-8 JSON")
    if not isinstance(payload, dict):
        return Refusal(400, "the event must be a JSON object", "not_object", "body is not a JSON object")
    fields = read_event(payload, EventShape(settings.webhook_shape, settings.webhook_fields))
    # Standard Webhooks always signs an id; hmac-sha256 senders may put one in a header, the body, or nowhere.
    event_id = event_id_for([verified.message_id, headers.get(settings.webhook_id_header), fields.event_id], body)
    stale = verified.scheme == "hmac-sha256" and _too_old(settings, fields.timestamp)
    return Examined(verified, fields, payload, event_id, stale)


def store_delivery(examined: Examined, body: bytes, headers: HeaderSource, source_ip: str, settings: Settings) -> bool:
    """Commit a delivery that `examine` took and is not stale; False when it was stored before. In an app context."""
    kept = kept_headers(headers, settings)
    stored = record_event(examined.verified, examined.event_id, examined.fields, body, kept, source_ip)
    if stored:
        saw_event(examined.fields, examined.payload)
    metrics.count_webhook("stored" if stored else "duplicate")
    return stored


def receive() -> Answer:
    """Take one delivery from the Flow Service (the ones `intake` did not take already)."""
    settings = current.settings()
    body = _read_body(settings.webhook_max_bytes)  # raw bytes: re-serialised JSON would not match the signature
    if body is None:
        return _reject(
            413, "payload too large", "too_large", f"body is over the limit of {settings.webhook_max_bytes} bytes"
        )
    if request.content_length is not None and len(body) < request.content_length:
        # The sender stopped before its own Content-Length: no signature can match, and no secret is to blame.
        reason = f"body ended after {len(body)} of the {request.content_length} bytes its Content-Length announced"
        return _reject(400, "incomplete body", "malformed", reason, body)
    examined = examine(body, request.headers, request.mimetype, settings)
    if isinstance(examined, Refusal):
        return _reject(examined.status, examined.public, examined.kind, examined.reason, body)
    if examined.stale:
        if was_pruned(examined.event_id) or body_seen_before(body):
            # Stored once and removed by retention since: a replay, never a new event.
            metrics.count_webhook("duplicate")
            return _answer(200, answer_body(False, examined.event_id))
        return _reject(
            400,
            "event older than the retention window",
            "stale_event",
            "event time is before the retention window",
            body,
        )
    stored = store_delivery(examined, body, request.headers, client_address(), settings)
    return _answer(200, answer_body(stored, examined.event_id))


def answer_body(stored: bool, event_id: str) -> dict[str, str]:
    return {"status": "stored" if stored else "duplicate", "id": event_id}


def kept_headers(headers: HeaderSource, settings: Settings) -> dict[str, str]:
    names = (*KEPT_HEADERS, settings.webhook_id_header.lower())
    return {name: headers[name] for name in names if name in headers}
