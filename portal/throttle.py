"""Throttling that holds: an atomic count-then-check in a store every worker and instance shares.

Each attempt is counted *before* the work it guards (a password check, a rejected delivery), in one
atomic step of the store (a Lua script in Redis, a lock in memory), so parallel attempts cannot slip
past the limit. When the shared store cannot be reached the caller is told (`ThrottleUnavailable`)
and decides to fail closed; nothing silently falls back to unlimited.
"""

import logging
import time
from dataclasses import dataclass

from flask import Flask, current_app, request
from limits import RateLimitItem, parse_many
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter

log = logging.getLogger(__name__)

SIGN_IN_PER_ACCOUNT = "5/minute;20/hour"
# An office behind one address signs many people in; the address limit only stops a spray of names.
SIGN_IN_PER_ADDRESS = "30/minute;200/hour"
REJECTED_DELIVERIES_PER_ADDRESS = "20/minute"
STORE_TIMEOUT = 1.0  # seconds: an unreachable Redis must not hold a sign-in for long


class ThrottleUnavailable(RuntimeError):
    """The shared throttling store could not be reached; the guarded action must not go ahead."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # seconds until the attempt would be allowed (0 when allowed)


class Throttle:
    """Named limits over one storage: `throttle.attempt("sign-in-account", SIGN_IN_PER_ACCOUNT, name)`."""

    def __init__(self, storage_uri: str, prefix: str, enabled: bool = True):
        options = {}
        if storage_uri.startswith(("redis://", "rediss://", "unix://")):
            options = {"key_prefix": prefix, "socket_timeout": STORE_TIMEOUT, "socket_connect_timeout": STORE_TIMEOUT}
        self.enabled = enabled
        self.shared = bool(options)
        self._storage = storage_from_string(storage_uri, **options)
        self._limiter = MovingWindowRateLimiter(self._storage)

    def attempt(self, name: str, limits: str, key: str) -> Verdict:
        """Count one attempt against every limit in `limits`; not allowed when any of them is used up."""
        if not self.enabled:
            return Verdict(True, 0)
        items = parse_many(limits)
        try:
            counted = [self._limiter.hit(item, name, key) for item in items]  # every limit counts the attempt
            if all(counted):
                return Verdict(True, 0)
            return Verdict(False, self._wait(items, name, key))
        except Exception as error:  # redis raises its own ConnectionError/TimeoutError family
            log.error("the throttling store is unreachable (%s): refusing %r", type(error).__name__, name)
            raise ThrottleUnavailable(name) from error

    def forget(self, name: str, limits: str, key: str) -> None:
        """Start `key`'s count again (a successful sign-in clears the account's failures)."""
        if not self.enabled:
            return
        try:
            for item in parse_many(limits):
                self._limiter.clear(item, name, key)
        except Exception as error:
            log.warning("could not clear a throttle count (%s)", type(error).__name__)

    def _wait(self, items: list[RateLimitItem], name: str, key: str) -> int:
        now = time.time()
        waits = [
            stats.reset_time - now
            for item in items
            if (stats := self._limiter.get_window_stats(item, name, key)).remaining <= 0
        ]
        return max(1, round(max(waits, default=60)))


def init_app(app: Flask, redis_url: str | None, prefix: str) -> None:
    enabled = app.config.get("RATELIMIT_ENABLED", True)
    app.extensions["portal.throttle"] = Throttle(redis_url or "memory://", prefix, enabled)


def throttle() -> Throttle:
    return current_app.extensions["portal.throttle"]


def client_address() -> str:
    """The address the request came from (ProxyFix has put the client's there behind trusted proxies)."""
    return request.remote_addr or "unknown"
