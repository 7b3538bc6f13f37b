"""Throttling that holds: an atomic count-then-check in a store every worker and instance shares.

Each attempt is counted *before* the work it guards (a password check, a rejected delivery), in one
atomic step of the store (a Lua script in Redis, a lock in memory), so parallel attempts cannot slip
past the limit. When the shared store cannot be reached the caller is told (`ThrottleUnavailable`)
and decides to fail closed; nothing silently falls back to unlimited.
"""

import ipaddress
import logging
import os
import time
from dataclasses import dataclass

from flask import Flask, current_app, request
from limits import RateLimitItem, parse_many
from limits.storage import Storage, storage_from_string
from limits.strategies import MovingWindowRateLimiter

log = logging.getLogger(__name__)

# Guessing one account's password from one address; then from anywhere (looser: a stranger who spends these
# locks the account out for everyone, so they are a ceiling on distributed guessing, not the first line).
SIGN_IN_PER_ACCOUNT_AND_ADDRESS = "5/minute;20/hour"
SIGN_IN_PER_ACCOUNT = "10/minute;100/hour"
# Per network (IPv4 /24, IPv6 /64: one sender has all of it as easily as one address). An office behind
# one network signs many people in; this limit only stops a spray of names.
SIGN_IN_PER_NETWORK = "60/minute;600/hour"
REJECTED_DELIVERIES_PER_NETWORK = "20/minute"
# Searches by a typed national id, per staff member: a search tells whether a guessed id has a flow, so guessing
# the ~500 ids of a birth date shown masked would reveal the whole id without a Reveal. A caseworker's day of
# look-ups stays well within these.
NATIONAL_ID_SEARCHES_PER_USER = "10/minute;60/hour;300/day"
PERSON_SEARCHED_LATELY = "1/hour"  # a person's results read again within the hour (pages, Back) count no more
STORE_TIMEOUT = 1.0  # seconds: an unreachable Redis must not hold a sign-in for long
OUTAGE_REPORT_EVERY = 60.0  # seconds between log lines about an unreachable store
GENERATION_LIFETIME = 7 * 24 * 3600  # seconds an unlock is remembered: far longer than any sign-in window


class ThrottleUnavailable(RuntimeError):
    """The shared throttling store could not be reached; the guarded action must not go ahead."""


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after: int  # seconds until the attempt would be allowed (0 when allowed)


class Throttle:
    """Named limits over one storage: `throttle.attempt("sign-in-account", SIGN_IN_PER_ACCOUNT, name)`."""

    def __init__(self, storage_uri: str, prefix: str, enabled: bool = True):
        options: dict[str, float | str | bool] = {}
        if storage_uri.startswith(("redis://", "rediss://", "unix://")):
            options = {"key_prefix": prefix, "socket_timeout": STORE_TIMEOUT, "socket_connect_timeout": STORE_TIMEOUT}
        self.enabled = enabled
        self.shared = bool(options)
        storage = storage_from_string(storage_uri, **options)
        if not isinstance(storage, Storage):  # an async+ URI: the limiter below is synchronous
            raise ValueError(f"not a synchronous limits storage: {storage_uri.split(':', 1)[0]}")
        self._storage = storage
        self._limiter = MovingWindowRateLimiter(self._storage)
        self._reported_at = -OUTAGE_REPORT_EVERY

    def attempt(self, name: str, limits: str, key: str) -> Verdict:
        """Count one attempt against the limits in `limits`, in order; refused at the first one used up.

        A refused attempt is not counted by the limits after the one that refused it: an hour's allowance
        is spent only by attempts the minute let through.
        """
        if not self.enabled:
            return Verdict(True, 0)
        items = parse_many(limits)
        try:
            for item in items:
                if not self._limiter.hit(item, name, key):
                    return Verdict(False, self._wait(items, name, key))
            return Verdict(True, 0)
        except Exception as error:  # redis raises its own ConnectionError/TimeoutError family
            self._report_outage(name, error)
            raise ThrottleUnavailable(name) from error

    def used_up(self, name: str, limits: str, key: str) -> bool:
        """Whether one more attempt would be refused, without counting one."""
        if not self.enabled:
            return False
        try:
            return not all(self._limiter.test(item, name, key) for item in parse_many(limits))
        except Exception as error:
            self._report_outage(name, error)
            raise ThrottleUnavailable(name) from error

    def reachable(self) -> bool:
        """Whether the shared store answers (always, for a process's own memory)."""
        try:
            return bool(self._storage.check())
        except Exception:  # noqa: BLE001 - any failure of the store's client means: not reachable
            return False

    def _report_outage(self, name: str, error: Exception) -> None:
        now = time.monotonic()
        if now - self._reported_at >= OUTAGE_REPORT_EVERY:  # one line a minute, not one per request
            self._reported_at = now
            log.error("the throttling store is unreachable (%s): refusing %r", type(error).__name__, name)

    def generation(self, key: str) -> int:
        """How many times `key` was started afresh (`renew`): part of the keys counted for it."""
        if not self.enabled:
            return 0
        try:
            return int(self._storage.get(f"generation/{key}") or 0)
        except Exception as error:
            self._report_outage("generation", error)
            raise ThrottleUnavailable("generation") from error

    def renew(self, key: str) -> None:
        """Start every count kept under `key`'s generation afresh, whatever address it was counted for."""
        if not self.enabled:
            return
        try:
            self._storage.incr(f"generation/{key}", GENERATION_LIFETIME)
        except Exception as error:
            self._report_outage("renew", error)
            raise ThrottleUnavailable("renew") from error

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
    workers = os.environ.get("PORTAL_WORKERS", "")  # gunicorn.conf.py tells its workers their count
    if enabled and not redis_url and workers.isdigit() and int(workers) > 1:
        # production refuses this; elsewhere (a demo, a test deployment) it is allowed, but not silently
        log.warning(
            "throttle: sign-in and national-id search limits are kept in each worker's memory, so %s workers allow "
            "%s times as many attempts; set PORTAL_REDIS_URL to share them",
            workers,
            workers,
        )


def throttle() -> Throttle:
    return current_app.extensions["portal.throttle"]


def network_of(address: str) -> str:
    """The network an address belongs to (IPv4 /24, IPv6 /64): one sender owns all of it as easily as one address."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    ip = getattr(ip, "ipv4_mapped", None) or ip  # ::ffff:203.0.113.5 is 203.0.113.5
    return str(ipaddress.ip_network(f"{ip}/{24 if ip.version == 4 else 64}", strict=False))


def network_named(text: str) -> str:
    """The network an address or a network written by a person is in, as `network_of` names it."""
    try:
        return (
            network_of(str(ipaddress.ip_network(text, strict=False).network_address))
            if "/" in text
            else network_of(text)
        )
    except ValueError:
        return text


def client_address() -> str:
    """The address the request came from (ProxyFix has put the client's there behind trusted proxies)."""
    return request.remote_addr or "unknown"


def _account_key(username: str) -> str:
    return username.strip().lower()[:80]


def count_sign_in_attempt(username: str) -> int:
    """Count a sign-in attempt before its password is checked; the seconds to wait when over a limit, else 0.

    Counted per network, then per account from this address, then per account from anywhere; an attempt
    one of them refuses is not counted by the next.
    """
    limits, address = throttle(), client_address()
    account = _account_key(username)
    account = f"{account}#{limits.generation(account)}"  # `users unlock` starts every count of it afresh
    checks = (
        ("sign-in-network", SIGN_IN_PER_NETWORK, network_of(address)),
        ("sign-in-account-address", SIGN_IN_PER_ACCOUNT_AND_ADDRESS, f"{account}|{address}"),
        ("sign-in-account", SIGN_IN_PER_ACCOUNT, account),
    )
    for name, rule, key in checks:
        verdict = limits.attempt(name, rule, key)
        if not verdict.allowed:
            return verdict.retry_after
    return 0


def signed_in_well(username: str) -> None:
    """The right password from this address: its failures there start again."""
    limits, account = throttle(), _account_key(username)
    key = f"{account}#{limits.generation(account)}|{client_address()}"
    limits.forget("sign-in-account-address", SIGN_IN_PER_ACCOUNT_AND_ADDRESS, key)


def unlock_account(username: str) -> None:
    """Let the account sign in again at once, from every address, after a stranger spent its allowance."""
    throttle().renew(_account_key(username))
