"""Prometheus metrics: the pages served, the calls to the Flow Service, token fetches, webhooks, database errors.

No Flask here, so the Flow Service client counts through this module too. Under gunicorn,
`PROMETHEUS_MULTIPROC_DIR` (set by gunicorn.conf.py before the workers start) makes every worker write
its values to files there, and a scrape of any worker adds them all up. Every label takes its values from
a small fixed set (endpoint names, status codes, outcome words): nothing from a request becomes a label.
"""

import hmac
import ipaddress
import os
from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from .webhooks.schemes import REJECTION_KINDS

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

WEBHOOK_OUTCOMES = ("stored", "duplicate", "rejected")
# Why a delivery was rejected (the kinds rejections are tallied by), or that its address sent too many.
WEBHOOK_REASONS = (*REJECTION_KINDS, "rate_limited", "other")
NO_REASON = "none"  # the reason label of stored and duplicate deliveries

REQUESTS = Counter("portal_http_requests_total", "Requests served, by endpoint and status.", ["endpoint", "status"])
REQUEST_LATENCY = Histogram(
    "portal_http_request_duration_seconds", "Time to answer a request, by endpoint.", ["endpoint"]
)
UPSTREAM_REQUESTS = Counter(
    "portal_upstream_requests_total",
    "Calls to the Flow Service, by method and outcome (ok, http_4xx, http_5xx, timeout, connection, tls, malformed).",
    ["method", "outcome"],
)
UPSTREAM_LATENCY = Histogram(
    "portal_upstream_request_duration_seconds",
    "Time of one call to the Flow Service, by method and outcome.",
    ["method", "outcome"],
)
TOKEN_FETCHES = Counter(
    "portal_token_fetches_total", "Token requests to the identity provider, by outcome.", ["outcome"]
)
WEBHOOK_DELIVERIES = Counter(
    "portal_webhook_deliveries_total",
    "Webhook deliveries received, by outcome (stored, duplicate, rejected) and rejection reason.",
    ["outcome", "reason"],
)
SIGN_INS = Counter("portal_sign_ins_total", "Password sign-in attempts, by outcome.", ["outcome"])
DB_ERRORS = Counter(
    "portal_db_errors_total", "Requests that found the database unreachable or too slow, by error type.", ["error"]
)


def _create_webhook_series() -> None:
    """Every webhook series exists from the start, so a rate over one is zero rather than missing."""
    for outcome in WEBHOOK_OUTCOMES:
        for reason in WEBHOOK_REASONS if outcome == "rejected" else (NO_REASON,):
            WEBHOOK_DELIVERIES.labels(outcome, reason)


_create_webhook_series()


def observe_request(endpoint: str | None, status: int, seconds: float) -> None:
    """Count one answered request; `endpoint` is Flask's endpoint name (None when no route matched)."""
    endpoint = endpoint or "unmatched"
    REQUESTS.labels(endpoint, str(status)).inc()
    REQUEST_LATENCY.labels(endpoint).observe(seconds)


def observe_upstream(method: str, outcome: str, seconds: float) -> None:
    """Count one call to the Flow Service and how long it took."""
    UPSTREAM_REQUESTS.labels(method, outcome).inc()
    UPSTREAM_LATENCY.labels(method, outcome).observe(seconds)


def count_token_fetch(outcome: str) -> None:
    TOKEN_FETCHES.labels(outcome).inc()


def count_webhook(outcome: str, reason: str | None = None) -> None:
    """Count one delivery: `count_webhook("stored")`, `count_webhook("rejected", "signature")`."""
    if outcome not in WEBHOOK_OUTCOMES:
        raise ValueError(f"webhook outcome must be one of {', '.join(WEBHOOK_OUTCOMES)}, not {outcome!r}")
    if outcome != "rejected":
        reason = NO_REASON
    elif reason not in WEBHOOK_REASONS:
        reason = "other"
    WEBHOOK_DELIVERIES.labels(outcome, reason).inc()


def count_sign_in(outcome: str) -> None:
    """Count one password sign-in: success, failed, throttled, or unavailable (the throttling store is away)."""
    SIGN_INS.labels(outcome).inc()


def count_db_error(error: BaseException) -> None:
    DB_ERRORS.labels(type(error).__name__).inc()


def may_scrape(address: str | None, authorization: str | None, token: str | None, allowed: Iterable[Network]) -> bool:
    """Whether a scrape comes with the bearer token or from an allowed address."""
    if token and authorization:
        scheme, _, presented = authorization.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), token.encode()):
            return True
    try:
        client = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    client = getattr(client, "ipv4_mapped", None) or client  # ::ffff:127.0.0.1 from a dual-stack socket
    return any(client in network for network in allowed)


def exposition() -> tuple[bytes, str]:
    """The metrics in Prometheus' text format: this process's, or every worker's in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    return generate_latest(registry), CONTENT_TYPE_LATEST
