"""Signing a delivery as a sender would: the portal's own notices, `webhooks send-test` and the tests.

The sandbox signs with code of its own, so the two sides of a delivery never share a mistake.
"""

import hashlib
import hmac
from datetime import datetime

from standardwebhooks import Webhook


def standard_headers(secret: str, message_id: str, moment: datetime, body: str) -> dict[str, str]:
    """The three Standard Webhooks headers for `body` sent at `moment`."""
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(moment.timestamp())),
        "webhook-signature": Webhook(secret).sign(message_id, moment, body),
    }


def hmac_sha256(secret: str, body: bytes) -> str:
    """The hex HMAC-SHA256 of the raw body (the `hmac-sha256` scheme; sent prefixed `sha256=`)."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def signed_headers(
    scheme: str, secret: str, message_id: str, moment: datetime, body: str, hmac_header: str
) -> dict[str, str]:
    """The signature headers of `scheme` (FLOW_WEBHOOK_SCHEME) for one delivery."""
    if scheme == "standard-webhooks":
        return standard_headers(secret, message_id, moment, body)
    return {hmac_header: "sha256=" + hmac_sha256(secret, body.encode())}
