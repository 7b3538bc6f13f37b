"""Webhook signature schemes: Standard Webhooks (default) and a plain hex HMAC-SHA256 header."""

import base64
import binascii
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, overload

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from .signing import hmac_sha256

STANDARD_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")
# Why a delivery was refused, in a few words rejections are counted by (the reason text says more).
REJECTION_KINDS = (
    "signature",
    "stale_timestamp",
    "missing_header",
    "malformed_signature",
    "no_secret",
    "too_large",
    "content_type",
    "malformed",
    "too_deep",
    "not_object",
    "stale_event",
)
_SIGNATURE_ENTRY = re.compile(r"v\d+,[A-Za-z0-9+/=_-]+")
_HEX_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
SHA256_BYTES = 32  # an HMAC-SHA256, as every v1 signature is


class HeaderSource(Protocol):
    """Request headers as the webhook code reads them: a dict, or werkzeug's Headers and EnvironHeaders."""

    @overload
    def get(self, key: str, /) -> str | None: ...
    @overload
    def get(self, key: str, default: str, /) -> str: ...
    def __getitem__(self, key: str, /) -> str: ...
    def __contains__(self, key: str, /) -> bool: ...
    def items(self) -> Iterable[tuple[str, str]]: ...


class DeliveryRejected(Exception):
    """Verification failed; `reason` is for the rejected-deliveries record, never for the sender.

    `kind` names the reason among a few (REJECTION_KINDS): what rejections are counted by.
    """

    def __init__(self, reason: str, kind: str = "signature") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


@dataclass(frozen=True)
class Verified:
    scheme: str
    secret_index: int
    message_id: str | None  # the scheme's own delivery id, when it has one


def signature_headers(headers: HeaderSource, scheme: str, hmac_header: str) -> dict[str, str]:
    """The headers that matter for diagnosing a rejection."""
    names = STANDARD_HEADERS if scheme == "standard-webhooks" else (hmac_header,)
    return {name.lower(): value for name in names if (value := headers.get(name)) is not None}


def verify_standard(body: bytes, headers: HeaderSource, secrets: tuple[str, ...]) -> Verified:
    """Standard Webhooks: `v1,<base64 HMAC>` over `id.timestamp.body`, timestamp within 5 minutes."""
    wanted = {name: headers.get(name, "") for name in STANDARD_HEADERS}
    missing = [name for name, value in wanted.items() if not value]
    if missing:
        raise DeliveryRejected(f"missing header {', '.join(missing)}", "missing_header")
    # The library gives up on the first malformed entry, even before a valid one: drop them first.
    entries = [entry for entry in wanted["webhook-signature"].split() if _well_formed(entry)]
    if not entries:
        raise DeliveryRejected("webhook-signature has no well-formed entry", "malformed_signature")
    wanted["webhook-signature"] = " ".join(entries)
    if not any(_may_be_hmac_sha256(entry) for entry in entries):
        raise DeliveryRejected("webhook-signature has no v1 entry of 32 bytes (an HMAC-SHA256)", "malformed_signature")
    reason, kind = "no secret matches the signature", "signature"
    for index, secret in enumerate(secrets):
        try:
            Webhook(secret).verify(body, wanted, json_parse=False)
            return Verified("standard-webhooks", index, wanted["webhook-id"])
        except WebhookVerificationError as error:
            text = str(error).lower()
            if "timestamp" in text:
                reason, kind = f"{text} (the tolerance is 5 minutes)", "stale_timestamp"
                break  # the same for every secret
            if "header" in text:
                reason, kind = text, "missing_header"
                break
        except UnicodeDecodeError:
            raise DeliveryRejected("body is not UTF-8", "malformed") from None
        except (ValueError, binascii.Error):
            reason, kind = "webhook-signature entry is not base64", "malformed_signature"
    raise DeliveryRejected(reason, kind)


def _well_formed(entry: str) -> bool:
    """`v<n>,<base64>` whose base64 decodes as the library decodes it (`v1,abc` matches the pattern, not that)."""
    if not _SIGNATURE_ENTRY.fullmatch(entry):
        return False
    try:
        base64.b64decode(entry.split(",", 1)[1])
    except binascii.Error:
        return False
    return True


def _may_be_hmac_sha256(entry: str) -> bool:
    """A well-formed entry that a secret could match: the library checks `v1` entries only, each an HMAC-SHA256."""
    version, signature = entry.split(",", 1)
    return version != "v1" or len(base64.b64decode(signature)) == SHA256_BYTES


def verify_hmac_sha256(body: bytes, headers: HeaderSource, secrets: tuple[str, ...], header: str) -> Verified:
    """Hex HMAC-SHA256 of the raw body in `header`, optionally prefixed `sha256=`."""
    given = (headers.get(header) or "").strip()
    if not given:
        raise DeliveryRejected(f"missing header {header}", "missing_header")
    digest = given.removeprefix("sha256=")
    if not _HEX_SHA256.fullmatch(digest):
        raise DeliveryRejected(f"{header} is not a hex SHA-256 digest", "malformed_signature")
    for index, secret in enumerate(secrets):
        expected = hmac_sha256(secret, body)
        if hmac.compare_digest(expected, digest.lower()):
            return Verified("hmac-sha256", index, None)
    raise DeliveryRejected("no secret matches the signature")


def verify_delivery(
    body: bytes, headers: HeaderSource, *, scheme: str, secrets: tuple[str, ...], hmac_header: str
) -> Verified:
    if not secrets:
        raise DeliveryRejected("no webhook secret is configured (FLOW_WEBHOOK_SECRETS)", "no_secret")
    if scheme == "standard-webhooks":
        return verify_standard(body, headers, secrets)
    return verify_hmac_sha256(body, headers, secrets, hmac_header)
