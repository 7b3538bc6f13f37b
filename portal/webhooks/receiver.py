"""The webhook endpoint: verify the raw body, then store the event, then answer 2xx.

No sign-in and no CSRF here (the signature is the authentication); nothing else is exempt.
"""

import json

from flask import Blueprint, current_app, jsonify, request
from flask_limiter.util import get_remote_address
from werkzeug.exceptions import RequestEntityTooLarge

from ..extensions import csrf
from .schemes import DeliveryRejected, signature_headers, verify_delivery
from .store import record_event, record_rejection

KEPT_HEADERS = ("webhook-id", "webhook-timestamp", "user-agent", "content-type")


def make_blueprint(path: str) -> Blueprint:
    bp = Blueprint("webhooks", __name__)
    bp.add_url_rule(path, view_func=receive, methods=["POST"])
    csrf.exempt(receive)
    return bp


def _answer(http_status: int, body: dict):
    return jsonify(body), http_status


def _reject(status: int, public: str, reason: str, body_head: bytes = b""):
    settings = current_app.extensions["portal.settings"]
    headers = signature_headers(request.headers, settings.webhook_scheme, settings.webhook_header)
    record_rejection(reason, get_remote_address(), headers, body_head, settings.rejected_keep)
    current_app.logger.warning("webhook rejected from %s: %s", get_remote_address(), reason)
    return _answer(status, {"error": public})


def _usable_event_id(event_id) -> bool:
    return isinstance(event_id, str) and 0 < len(event_id) <= 255 and event_id.isprintable()


def receive():
    """Take one delivery from the Flow Service."""
    settings = current_app.extensions["portal.settings"]
    if (request.content_length or 0) > settings.webhook_max_bytes:
        return _reject(413, "payload too large", f"body of {request.content_length} bytes is over the limit")
    request.max_content_length = settings.webhook_max_bytes
    try:
        body = request.get_data(cache=True)  # raw bytes: re-serialised JSON would not match the signature
    except RequestEntityTooLarge:
        return _reject(413, "payload too large", "streamed body is over the limit")
    try:
        verified = verify_delivery(
            body,
            request.headers,
            scheme=settings.webhook_scheme,
            secrets=settings.webhook_secrets,
            hmac_header=settings.webhook_header,
        )
    except DeliveryRejected as rejected:
        return _reject(401, "invalid signature", rejected.reason, body)
    if request.mimetype != "application/json":
        return _reject(415, "content type must be application/json", f"content type {request.mimetype!r}", body)
    try:
        payload = json.loads(body.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError is a ValueError too
        return _reject(400, "malformed JSON", "body is not valid UTF-8 JSON", body)
    event_id = verified.message_id or (payload.get("id") if isinstance(payload, dict) else None)
    if not isinstance(payload, dict) or not _usable_event_id(event_id):
        return _reject(400, "the event must be a JSON object with an id", "no usable event id", body)
    kept = {name: request.headers[name] for name in KEPT_HEADERS if name in request.headers}
    stored = record_event(verified, event_id, payload, body, kept, get_remote_address())
    return _answer(200, {"status": "stored" if stored else "duplicate", "id": event_id})
