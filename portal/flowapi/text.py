"""Upstream text made safe for logs and pages: no national ids, no internals, bounded length."""

import logging
import re
from typing import Any

from ..masking import hide_url_passwords, mask_text

log = logging.getLogger(__name__)

MAX_REASON = 300
# What an exception, a stack trace or a server's own error page looks like. Staff must never see
# these: they say nothing a person can act on and may leak how the service is built.
_INTERNALS = re.compile(
    r"Traceback \(most recent call last\)|\n\s*at [\w$.<>]+\(|\.(java|kt|scala|py|cs|go|rb|js):\d+"
    r"|\b(java|javax|jakarta|org\.springframework|com\.fasterxml|System)\.[\w.]+(Exception|Error)\b"
    r"|\b\w+(Exception|Error): |\bNullPointer|\bSQLSTATE\b|<html|<!doctype",
    re.IGNORECASE,
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")


def redact(text: Any) -> str:
    """The text with every national id in it masked, as everywhere else; "" for anything not text."""
    return hide_url_passwords(mask_text(text)) if isinstance(text, str) else ""


def looks_internal(text: str) -> bool:
    return bool(_INTERNALS.search(text))


def safe_reason(text: Any, *, request_id: str | None = None) -> str | None:
    """Upstream words fit to show staff, or None; internals are logged (redacted) instead."""
    if not isinstance(text, str) or not text.strip():
        return None
    cleaned = redact(" ".join(_CONTROL.sub("", text).split()))  # spaces made plain first, then ids masked
    if looks_internal(cleaned):
        log.warning("flowapi: upstream text withheld from staff (request %s): %.500r", request_id, cleaned)
        return None
    return cleaned if len(cleaned) <= MAX_REASON else cleaned[: MAX_REASON - 1] + "…"
