"""Why a webhook delivery was refused, worked out on the rejection path while the secrets are at hand.

The verification path stays as it is; this runs only for a rejection that is kept as a sample (already
rate-limited per network). Words name secrets by their number in a setting, never by value: no secret,
no digest keyed by one and no expected signature ever reaches the detail.
"""

import base64
import binascii
import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from flask_babel import lazy_gettext as _l

from .schemes import SHA256_BYTES, HeaderSource

TOLERANCE_SECONDS = 5 * 60
MAX_VARIANTS = 12  # altered bodies tried per delivery: each costs one HMAC per configured secret
MAX_VARIANT_BYTES = 64 * 1024  # events are small; a large body is not re-serialised a dozen times
MAX_HEADERS_LOOKED_AT = 40
BOM = b"\xef\xbb\xbf"
_HEX_SHA256 = re.compile(r"(?:sha256=)?([0-9a-fA-F]{64})")
_INTEGER = re.compile(r"-?\d+")
# Whether a signature computed with a key over a body matches the delivery's; how a secret becomes an HMAC key.
Matcher = Callable[[bytes, bytes], bool]
KeyOf = Callable[[str], bytes]

TITLES = {
    "stale_timestamp": _l("Timestamp outside the 5-minute tolerance"),
    "retired_secret": _l("Signed with a retired secret"),
    "unknown_secret": _l("Signed with a secret not configured here"),
    "body_altered": _l("Body changed on the way"),
    "wrong_scheme": _l("Another signature scheme"),
    "missing_header": _l("Signature header missing"),
    "malformed_signature": _l("Signature header malformed"),
    "malformed_timestamp": _l("Timestamp header malformed"),
    "no_secret": _l("No webhook secret configured"),
    "too_large": _l("Body too large"),
    "content_type": _l("Not sent as JSON"),
    "malformed": _l("Body is not valid JSON"),
    "too_deep": _l("JSON nested too deep"),
    "not_object": _l("JSON is not an object"),
    "stale_event": _l("Event older than the retention window"),
    "undiagnosed": _l("Not diagnosed"),
}
CODES = tuple(TITLES)
# What a rejection kind (schemes.REJECTION_KINDS) is called on the page: the diagnoses' titles, and one more.
KIND_TITLES = {**TITLES, "signature": _l("Signature does not match")}

# Rejections made after the signature verified, or before it could be checked: the reason says it all.
_PLAIN_WORDS = {
    "no_secret": "no webhook secret is configured here: set FLOW_WEBHOOK_SECRETS to the secret the Flow Service "
    "shows for this endpoint",
    "too_large": "the body is over FLOW_WEBHOOK_MAX_BYTES: raise the limit if the service's events are that large",
    "content_type": "the signature is right but the body is not sent as application/json: check the sender or a "
    "proxy rewriting Content-Type",
    "malformed": "the signature is right but the body is not valid UTF-8 JSON: the sender produced broken JSON",
    "too_deep": "the signature is right but the JSON nests deeper than the portal accepts",
    "not_object": "the signature is right but the JSON is not an object, as every event is",
    "stale_event": "hmac-sha256 signs no time and this event is older than the retention window: a replay, "
    "or a sender re-sending old events",
}


@dataclass(frozen=True)
class Diagnosis:
    code: str
    detail: str

    @property
    def title(self) -> str:
        return str(TITLES.get(self.code, self.code))


@dataclass(frozen=True)
class Delivery:
    """One refused delivery and what the portal is configured with."""

    body: bytes
    headers: HeaderSource
    scheme: str
    secrets: tuple[str, ...] = field(repr=False)
    retired: tuple[str, ...] = field(repr=False)
    hmac_header: str
    id_header: str
    now: float
    # The body stored for an event id (a webhook-id, an id header or the id in the body), None when none is.
    stored_body: Callable[[str], bytes | None] = lambda event_id: None

    def header(self, name: str) -> str:
        return (self.headers.get(name) or "").strip()


def diagnose(delivery: Delivery, kind: str) -> Diagnosis:
    """Why `delivery` was refused with rejection `kind`: a code and a sentence for staff."""
    if kind in _PLAIN_WORDS and not _verification_failed(delivery, kind):
        return Diagnosis(kind, _PLAIN_WORDS[kind])
    if delivery.scheme == "standard-webhooks":
        return _diagnose_standard(delivery, kind)
    return _diagnose_hmac(delivery, kind)


def _verification_failed(delivery: Delivery, kind: str) -> bool:
    # Standard Webhooks cannot check a body that is not UTF-8: then the body may have been re-encoded.
    return kind == "malformed" and delivery.scheme == "standard-webhooks" and not _is_utf8(delivery.body)


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# -- Standard Webhooks ----------------------------------------------------------------------------


def _diagnose_standard(delivery: Delivery, kind: str) -> Diagnosis:
    missing = [name for name in ("webhook-id", "webhook-timestamp", "webhook-signature") if not delivery.header(name)]
    if missing:
        return _other_scheme(delivery) or Diagnosis(
            "missing_header",
            f"no {', '.join(missing)} header: the sender does not use Standard Webhooks, or a proxy drops "
            "these headers",
        )
    timestamp = _unix_seconds(delivery.header("webhook-timestamp"))
    if timestamp is None:
        return _malformed_timestamp(delivery.header("webhook-timestamp"))
    given = _standard_entries(delivery.header("webhook-signature"))
    if not given:
        return Diagnosis(
            "malformed_signature",
            "webhook-signature holds no v1,<base64> entry: the sender's Standard Webhooks library is misconfigured",
        )
    if all(len(signature) != SHA256_BYTES for signature in given) and not _hex_entries(delivery):
        return Diagnosis(
            "malformed_signature",
            "webhook-signature's v1 entries are no HMAC-SHA256 (32 bytes, base64): the header was cut or garbled on "
            "the way, or the sender signs with another hash; not a question of the secret",
        )
    signed_content = f"{delivery.header('webhook-id')}.{timestamp}.".encode()
    matches = _standard_matcher(signed_content, given)
    if kind == "stale_timestamp" or abs(delivery.now - timestamp) > TOLERANCE_SECONDS:
        return _stale(delivery, timestamp, _which_secret(delivery, matches, delivery.body, _whsec_key))
    return _standard_signature(delivery, matches)


def _standard_signature(delivery: Delivery, matches: Matcher) -> Diagnosis:
    retired = _first_match(delivery.retired, delivery.body, matches, _whsec_key)
    if retired is not None:
        return _retired(retired)
    if _first_match(delivery.secrets, delivery.body, matches, _text_key) is not None:
        return Diagnosis(
            "wrong_scheme",
            "the sender keys the HMAC with the whsec_ secret's text, not its base64-decoded bytes as Standard "
            "Webhooks does: fix the sender's signing library",
        )
    if _hex_entry_matches(delivery):
        return Diagnosis(
            "wrong_scheme",
            "webhook-signature carries a hex digest where Standard Webhooks wants base64: fix the sender, or "
            "set FLOW_WEBHOOK_SCHEME=hmac-sha256 if it signs like that scheme",
        )
    return _altered_or_unknown(delivery, matches, _whsec_key, delivery.header("webhook-id"))


def _unix_seconds(raw: str) -> int | None:
    """The timestamp as the reference library signs it (whole seconds), None when it cannot be read."""
    try:
        value = float(raw)
    except ValueError:
        return None
    if not math.isfinite(value) or abs(value) > 32_503_680_000:  # past year 3000: not seconds
        return None
    return math.floor(value)


def _malformed_timestamp(raw: str) -> Diagnosis:
    if _INTEGER.fullmatch(raw) and len(raw.lstrip("-")) >= 13:
        return Diagnosis(
            "malformed_timestamp",
            "webhook-timestamp looks like milliseconds; Standard Webhooks wants Unix seconds: fix the sender",
        )
    return Diagnosis("malformed_timestamp", "webhook-timestamp is not a Unix time in seconds: fix the sender")


def _standard_entries(header: str) -> list[bytes]:
    """The decoded v1 signatures of a webhook-signature header; malformed entries left out."""
    decoded = []
    for entry in header.split()[:MAX_HEADERS_LOOKED_AT]:
        version, _, value = entry.partition(",")
        if version != "v1" or not value:
            continue
        try:
            decoded.append(base64.b64decode(value, validate=True))
        except (ValueError, binascii.Error):
            continue
    return decoded


def _standard_matcher(signed_prefix: bytes, given: list[bytes]) -> Matcher:
    def matches(key: bytes, body: bytes) -> bool:
        digest = hmac.new(key, signed_prefix + body, hashlib.sha256).digest()
        return any(hmac.compare_digest(digest, signature) for signature in given)

    return matches


def _hex_entries(delivery: Delivery) -> set[str]:
    """The webhook-signature entries that are an HMAC-SHA256 in hex, in lower case."""
    entries = delivery.header("webhook-signature").split()[:MAX_HEADERS_LOOKED_AT]
    return {value.lower() for entry in entries for value in [entry.partition(",")[2]] if _HEX_SHA256.fullmatch(value)}


def _hex_entry_matches(delivery: Delivery) -> bool:
    """Whether a v1 entry is the hex HMAC of the body (or of the signed content) under a configured secret."""
    hex_entries = _hex_entries(delivery)
    if not hex_entries:
        return False
    prefix = f"{delivery.header('webhook-id')}.{_unix_seconds(delivery.header('webhook-timestamp'))}.".encode()
    for secret in delivery.secrets:
        for key in {_whsec_key(secret), _text_key(secret)}:
            for content in (delivery.body, prefix + delivery.body):
                if hmac.new(key, content, hashlib.sha256).hexdigest() in hex_entries:
                    return True
    return False


def _stale(delivery: Delivery, timestamp: int, matching: str | None) -> Diagnosis:
    offset = delivery.now - timestamp
    if offset >= 0:
        when = (
            f"signed {duration(offset)} before it arrived; the tolerance is 5 minutes: check the sender's clock "
            "or a queue holding deliveries"
        )
    else:
        when = (
            f"signed {duration(-offset)} after it arrived (the sender's clock is ahead); the tolerance is "
            "5 minutes: check the sender's clock"
        )
    return Diagnosis("stale_timestamp", f"{when}. {matching or 'No configured or retired secret matches either.'}")


def _which_secret(delivery: Delivery, matches: Matcher, body: bytes, key_of: KeyOf) -> str | None:
    """Words saying which secret the signature verifies with, when one does."""
    index = _first_match(delivery.secrets, body, matches, key_of)
    if index is not None:
        return f"The signature matches secret #{index + 1} of FLOW_WEBHOOK_SECRETS: the secret is right."
    index = _first_match(delivery.retired, body, matches, key_of)
    if index is not None:
        return f"The signature matches retired secret #{index + 1} of FLOW_WEBHOOK_RETIRED_SECRETS."
    return None


# -- hmac-sha256 ----------------------------------------------------------------------------------


def _diagnose_hmac(delivery: Delivery, kind: str) -> Diagnosis:
    given = delivery.header(delivery.hmac_header)
    if not given:
        return _other_scheme(delivery) or Diagnosis(
            "missing_header",
            f"no {delivery.hmac_header} header (FLOW_WEBHOOK_HEADER): the sender signs elsewhere or not at all",
        )
    digest = _HEX_SHA256.fullmatch(given)
    if not digest:
        return _malformed_hmac(delivery, given)
    wanted = digest.group(1).lower()

    def matches(key: bytes, body: bytes) -> bool:
        return hmac.compare_digest(hmac.new(key, body, hashlib.sha256).hexdigest(), wanted)

    retired = _first_match(delivery.retired, delivery.body, matches, _text_key)
    if retired is not None:
        return _retired(retired)
    whsec = [secret for secret in delivery.secrets if secret.startswith("whsec_")]
    if _first_match(tuple(whsec), delivery.body, matches, _whsec_key) is not None:
        return Diagnosis(
            "wrong_scheme",
            "the sender keys the HMAC with the whsec_ secret's base64-decoded bytes, as Standard Webhooks does, "
            "not with its text: sign with the text, or use FLOW_WEBHOOK_SCHEME=standard-webhooks on both sides",
        )
    return _altered_or_unknown(delivery, matches, _text_key, delivery.header(delivery.id_header))


def _malformed_hmac(delivery: Delivery, given: str) -> Diagnosis:
    header = delivery.hmac_header
    if given.startswith("v1,"):
        return Diagnosis(
            "wrong_scheme",
            f"{header} holds a Standard Webhooks signature (v1,...): set FLOW_WEBHOOK_SCHEME=standard-webhooks",
        )
    if given.startswith("t=") and ",v1=" in given:
        return _stripe()
    if _base64_digest_matches(delivery, given.removeprefix("sha256=")):
        return Diagnosis(
            "wrong_scheme",
            f"{header} carries the HMAC-SHA256 as base64 where the hmac-sha256 scheme wants hex: have the sender "
            "send hex, or use FLOW_WEBHOOK_SCHEME=standard-webhooks",
        )
    return Diagnosis(
        "malformed_signature",
        f"{header} is not a hex SHA-256 digest (64 hex digits, optionally after sha256=): fix the sender",
    )


def _base64_digest_matches(delivery: Delivery, value: str) -> bool:
    try:
        given = base64.b64decode(
            value + "=" * (-len(value) % 4), altchars=b"-_" if "-" in value or "_" in value else None
        )
    except (ValueError, binascii.Error):
        return False
    return any(
        hmac.compare_digest(hmac.new(_text_key(secret), delivery.body, hashlib.sha256).digest(), given)
        for secret in delivery.secrets
    )


# -- shared ---------------------------------------------------------------------------------------


def _whsec_key(secret: str) -> bytes:
    """The key bytes of a whsec_ secret, decoded as the reference library decodes it."""
    try:
        return base64.b64decode(secret.removeprefix("whsec_") + "==")
    except (ValueError, binascii.Error):
        return secret.encode()


def _text_key(secret: str) -> bytes:
    return secret.encode()


def _first_match(secrets: tuple[str, ...], body: bytes, matches: Matcher, key_of: KeyOf) -> int | None:
    for index, secret in enumerate(secrets):
        if matches(key_of(secret), body):
            return index
    return None


def _retired(index: int) -> Diagnosis:
    return Diagnosis(
        "retired_secret",
        f"signed with retired secret #{index + 1} of FLOW_WEBHOOK_RETIRED_SECRETS: the sender still signs with "
        "the previous secret of a rotation: finish the rotation at the Flow Service, or put it back in "
        "FLOW_WEBHOOK_SECRETS until it has",
    )


def _altered_or_unknown(delivery: Delivery, matches: Matcher, key_of: KeyOf, header_id: str) -> Diagnosis:
    for change, original in body_variants(delivery.body):
        if _first_match(delivery.secrets, original, matches, key_of) is not None:
            return Diagnosis(
                "body_altered",
                f"the body was changed on the way ({change}); a configured secret matches the body before "
                "the change: a proxy re-serialising JSON or rewriting text?",
            )
    for event_id in filter(None, (header_id, _id_in_body(delivery.body))):
        stored = delivery.stored_body(event_id)
        if stored is None or stored == delivery.body:
            continue
        if _first_match(delivery.secrets, stored, matches, key_of) is not None:  # signed as the stored body was
            return Diagnosis(
                "body_altered",
                f"an event with the same id ({event_id[:60]}) is stored with a different body, and the signature "
                "matches the stored body: the body was changed on the way: a proxy re-serialising JSON?",
            )
        return Diagnosis(
            "unknown_secret",
            f"the id of a stored event ({event_id[:60]}) with another body, and a signature that matches neither "
            "body with any configured secret: not signed with this endpoint's secret; if the Flow Service did not "
            "send it, someone who knows an event's id did",
        )
    return Diagnosis(
        "unknown_secret",
        "signed with a secret not configured here (neither in FLOW_WEBHOOK_SECRETS nor "
        "FLOW_WEBHOOK_RETIRED_SECRETS); the timestamp is fine and the body looks intact: copy the secret the "
        "Flow Service shows for this endpoint",
    )


def _id_in_body(body: bytes) -> str | None:
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return None
    value = document.get("id") if isinstance(document, dict) else None
    return value if isinstance(value, str) else None


def body_variants(body: bytes) -> Iterator[tuple[str, bytes]]:
    """What the body may have been before a proxy changed it: (the change, the earlier body), at most MAX_VARIANTS."""
    if len(body) > MAX_VARIANT_BYTES:
        return
    seen = {body}
    for change, original in _candidate_originals(body):
        if original not in seen:
            seen.add(original)
            yield change, original
            if len(seen) > MAX_VARIANTS:
                return


def _candidate_originals(body: bytes) -> Iterator[tuple[str, bytes]]:
    if body.endswith(b"\n"):
        yield "a trailing newline was added", body.removesuffix(b"\n").removesuffix(b"\r")
    else:
        yield "a trailing newline was removed", body + b"\n"
    if b"\r\n" in body:
        yield "line ends were turned into CRLF", body.replace(b"\r\n", b"\n")
    elif b"\n" in body:
        yield "line ends were turned into LF", body.replace(b"\n", b"\r\n")
    if body.startswith(BOM):
        yield "a byte-order mark was added", body.removeprefix(BOM)
    else:
        yield "a byte-order mark was removed", BOM + body
    if not _is_utf8(body):
        yield "the text was re-encoded from UTF-8 to Latin-1", body.decode("latin-1").encode("utf-8")
    yield from _reserialised(body)


def _reserialised(body: bytes) -> Iterator[tuple[str, bytes]]:
    try:
        document = json.loads(body)  # bytes: json reads past a UTF-8 byte-order mark itself
    except (ValueError, RecursionError):
        return
    change = "the JSON was re-serialised"
    for sort_keys in (False, True):
        for separators in ((",", ":"), (", ", ": ")):
            for ensure_ascii in (False, True):
                text = json.dumps(document, separators=separators, sort_keys=sort_keys, ensure_ascii=ensure_ascii)
                yield change, text.encode("utf-8")
    yield change, json.dumps(document, indent=2, ensure_ascii=False).encode("utf-8")


def _other_scheme(delivery: Delivery) -> Diagnosis | None:
    """A delivery signed under another scheme than FLOW_WEBHOOK_SCHEME: which, and the setting to change."""
    names = {str(name).lower(): str(name) for name, _ in list(delivery.headers.items())[:MAX_HEADERS_LOOKED_AT]}
    standard = delivery.scheme == "standard-webhooks"
    if not standard and "webhook-signature" in names:
        return Diagnosis(
            "wrong_scheme",
            "the delivery carries Standard Webhooks headers (webhook-id, -timestamp, -signature) while "
            "FLOW_WEBHOOK_SCHEME=hmac-sha256: set FLOW_WEBHOOK_SCHEME=standard-webhooks and whsec_ secrets",
        )
    if "svix-signature" in names:
        return Diagnosis(
            "wrong_scheme",
            "the delivery carries Svix's svix-id/-timestamp/-signature headers: Standard Webhooks under other names; "
            "have the sender send the webhook-* names",
        )
    if "stripe-signature" in names:
        return _stripe()
    own = {"webhook-id", "webhook-timestamp", "webhook-signature"} if standard else {delivery.hmac_header.lower()}
    for lowered, name in names.items():
        if lowered not in own and ("signature" in lowered or "hmac" in lowered):
            return _named_hmac_header(delivery, name, standard)
    if not standard:
        for name in names.values():
            if _hex_matches(delivery, delivery.header(name)):
                return _named_hmac_header(delivery, name, standard)
    return None


def _hex_matches(delivery: Delivery, value: str) -> bool:
    """Whether `value` is the hex HMAC-SHA256 of the body under a configured secret (its text as the key)."""
    digest = _HEX_SHA256.fullmatch(value)
    return digest is not None and any(
        hmac.compare_digest(
            hmac.new(_text_key(secret), delivery.body, hashlib.sha256).hexdigest(), digest.group(1).lower()
        )
        for secret in delivery.secrets
    )


def _named_hmac_header(delivery: Delivery, name: str, standard: bool) -> Diagnosis:
    source = (
        "GitHub's X-Hub-Signature-256 (hex HMAC of the body)"
        if name.lower() == "x-hub-signature-256"
        else (f"a signature in {name}")
    )
    if standard:
        return Diagnosis(
            "wrong_scheme",
            f"the delivery carries {source}, not Standard Webhooks headers: if it is a hex HMAC-SHA256 of the body, "
            f"set FLOW_WEBHOOK_SCHEME=hmac-sha256 and FLOW_WEBHOOK_HEADER={name}",
        )
    confirmed = " (a configured secret matches it)" if _hex_matches(delivery, delivery.header(name)) else ""
    return Diagnosis(
        "wrong_scheme",
        f"the delivery carries {source}{confirmed} where FLOW_WEBHOOK_HEADER names {delivery.hmac_header}: "
        f"set FLOW_WEBHOOK_HEADER={name}",
    )


def _stripe() -> Diagnosis:
    return Diagnosis(
        "wrong_scheme",
        "the delivery is signed with Stripe's Stripe-Signature scheme (t=...,v1=...), which the portal does not "
        "read: have the sender use Standard Webhooks (FLOW_WEBHOOK_SCHEME=standard-webhooks)",
    )


def duration(seconds: float) -> str:
    """A span as staff read it: "45 s", "7 min 12 s", "3 h 5 min", "2 d 4 h"."""
    whole = int(round(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    for big, big_unit, small, small_unit in ((days, "d", hours, "h"), (hours, "h", minutes, "min")):
        if big:
            return f"{big} {big_unit}" + (f" {small} {small_unit}" if small else "")
    return f"{minutes} min {secs} s" if minutes else f"{secs} s"
