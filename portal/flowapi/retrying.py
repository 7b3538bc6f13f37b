"""How long to wait before trying the Flow Service or its identity provider again: the service's `Retry-After`
when it says one, else an exponential back-off with jitter."""

import math
import random
import re
import time
from email.utils import parsedate_to_datetime

BACKOFF_BASE, BACKOFF_CAP = 0.2, 2.0
MAX_RETRY_AFTER = 3600.0
_DELAY_SECONDS = re.compile(r"[0-9]{1,7}(\.[0-9]{1,3})?")  # ASCII only: "²".isdigit() is True


def backoff_seconds(attempt: int) -> float:
    """The wait before retry `attempt` + 1: doubling from a fifth of a second up to two, somewhere in the upper
    half of that (so clients that failed together do not come back together)."""
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2.0**attempt)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def wait_before_retry(attempt: int, retry_after: float | None) -> float:
    """The wait before retry `attempt` + 1: the `Retry-After` the server said, but never less than the back-off (a
    0, or a date already past on a clock that runs ahead, sent two retries back to back: a stand-in)."""
    backoff = backoff_seconds(attempt)
    return backoff if retry_after is None else max(retry_after, backoff)


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds (RFC 9110: delay-seconds or an HTTP-date), None when unreadable."""
    value = (value or "").strip()
    if _DELAY_SECONDS.fullmatch(value):
        return min(float(value), MAX_RETRY_AFTER)
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment is None or moment.tzinfo is None:
        return None
    delay = moment.timestamp() - (time.time() if now is None else now)
    return min(max(delay, 0.0), MAX_RETRY_AFTER) if math.isfinite(delay) else None
