"""HTTP to the Flow Service: one pooled session, timeouts, bounded retries, typed errors.

Retries are our own small loop rather than urllib3's `Retry`, because the whole attempt must fit
a time budget: `Retry` sleeps for whatever `Retry-After` says and knows nothing of token renewal.
"""

import logging
import random
import re
import time
import uuid
from typing import Any

import requests
from requests.adapters import HTTPAdapter

from .auth import TokenProvider
from .errors import (
    FieldError,
    FlowApiError,
    InsufficientScope,
    NotFound,
    RateLimited,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    ValidationFailed,
)

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = (429, 502, 503, 504)
REQUEST_ID_HEADER = "X-Request-Id"
BACKOFF_BASE, BACKOFF_CAP = 0.2, 2.0
# Long digit runs in upstream text may be national ids; never let them reach a log or a page.
_ID_LIKE = re.compile(r"\d{6}[\s+\-A-Za-z]?\d{3,6}[0-9A-Za-z]?")


def redact(text: Any) -> str:
    return _ID_LIKE.sub("•••", text) if isinstance(text, str) else ""


class Transport:
    def __init__(
        self,
        base_url: str,
        provider: TokenProvider,
        *,
        connect_timeout: float,
        read_timeout: float,
        retries: int,
        retry_budget: float,
        pool_size: int = 32,
    ):
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.timeout = (connect_timeout, read_timeout)
        self.retries, self.retry_budget = retries, retry_budget
        self.session = requests.Session()
        adapter = HTTPAdapter(pool_connections=2, pool_maxsize=pool_size, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def get(self, path: str, params: dict | None = None) -> Any:
        return self._send("GET", path, params=params, idempotent=True)

    def post(self, path: str, body: dict) -> Any:
        return self._send("POST", path, body=body, idempotent=False)

    def _send(self, method: str, path: str, *, params=None, body=None, idempotent: bool) -> Any:
        deadline = time.monotonic() + self.retry_budget
        attempt, renewed = 0, False
        while True:
            token = self.provider.token()
            request_id = str(uuid.uuid4())
            outcome, retry_after = self._attempt(method, path, params, body, token, request_id)
            if not isinstance(outcome, FlowApiError):
                return outcome
            error = outcome
            if isinstance(error, Unauthorized) and not renewed:
                # The token may have been revoked or have expired early: one fresh try.
                self.provider.invalidate(token)
                renewed = True
                continue
            if not (idempotent and error.retryable) or attempt >= self.retries:
                raise error
            delay = retry_after if retry_after is not None else _backoff(attempt)
            if time.monotonic() + delay > deadline:
                raise error
            log.warning("flowapi: %s %s failed (%s), retrying in %.2f s", method, path, error.support_code, delay)
            time.sleep(delay)
            attempt += 1

    def _attempt(self, method, path, params, body, token, request_id):
        """One request: the parsed answer, or a FlowApiError (with a Retry-After delay if any)."""
        headers = {"Authorization": f"Bearer {token}", REQUEST_ID_HEADER: request_id, "Accept": "application/json"}
        started = time.monotonic()
        try:
            response = self.session.request(
                method,
                self.base_url + path,
                params=params,
                json=body,
                headers=headers,
                timeout=self.timeout,
                allow_redirects=False,
            )
        except requests.exceptions.SSLError:
            return UpstreamUnavailable(
                "The Flow Service's TLS certificate cannot be verified", code="tls", request_id=request_id
            ), None
        except requests.ConnectTimeout:
            return _retryable(
                UpstreamTimeout(
                    "Timed out connecting to the Flow Service", code="connect_timeout", request_id=request_id
                )
            ), None
        except requests.Timeout:
            return UpstreamTimeout(
                "The Flow Service did not answer in time", code="read_timeout", request_id=request_id
            ), None
        except requests.RequestException as failure:
            return _retryable(
                UpstreamUnavailable(
                    f"Cannot reach the Flow Service ({type(failure).__name__})",
                    code="unreachable",
                    request_id=request_id,
                )
            ), None
        log.info(
            "flowapi: %s %s -> %s in %.0f ms (request %s)",
            method,
            path,
            response.status_code,
            (time.monotonic() - started) * 1000,
            request_id,
        )
        try:
            return _parse(response, request_id), None
        except FlowApiError as error:
            retry_after = getattr(error, "retry_after", None)
            if response.status_code in RETRYABLE_STATUSES:
                _retryable(error)
            return error, retry_after


def _retryable(error: FlowApiError) -> FlowApiError:
    error.retryable = True
    return error


def _backoff(attempt: int) -> float:
    ceiling = min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt)
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def _retry_after(response: requests.Response) -> float | None:
    value = response.headers.get("Retry-After", "")
    return float(value) if value.isdigit() else None


def _json_or_none(response: requests.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _parse(response: requests.Response, request_id: str) -> Any:
    status = response.status_code
    payload = _json_or_none(response)
    if 200 <= status < 300:
        if payload is None:
            raise UpstreamProtocolError(
                "The Flow Service sent a body that is not JSON",
                status=status,
                code="malformed_json",
                request_id=request_id,
            )
        return payload
    raise _error_for(status, payload if isinstance(payload, dict) else {}, request_id, response)


def _error_for(status: int, body: dict, request_id: str, response: requests.Response) -> FlowApiError:
    code = body.get("error") if isinstance(body.get("error"), str) else f"http_{status}"
    message = redact(body.get("message"))
    common = {"status": status, "code": code, "request_id": request_id}
    if status in (400, 413, 422):
        details = [
            FieldError(str(item.get("field", "")), redact(item.get("message")))
            for item in body.get("details") or []
            if isinstance(item, dict)
        ]
        return ValidationFailed(message, details=details, **common)
    if status == 401:
        return Unauthorized(message, **common)
    if status == 403:
        return InsufficientScope(message, **common)
    if status == 404:
        return NotFound(message, **common)
    if status == 429:
        return RateLimited(message, retry_after=_retry_after(response), **common)
    if status in (408, 504):
        return UpstreamTimeout(message, **common)
    if status >= 500:
        return UpstreamUnavailable(message, **common)
    return UpstreamProtocolError(f"Unexpected answer HTTP {status}", **common)
