"""Bearer tokens for the Flow Service: client credentials (seed §5.1) or a self-signed JWT (§5.3)."""

import copy
import json
import logging
import math
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urljoin, urlsplit

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from joserfc import jwt

from .. import metrics
from ..rsakeys import load_private_key
from .bounded import AnswerTooLarge, read_within_bounds
from .errors import (
    ErrorContext,
    FlowApiError,
    InsufficientScope,
    RateLimited,
    TokenRequestRefused,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    outcome_kind,
)
from .guard import sandbox_refusal
from .retrying import retry_after_seconds, wait_before_retry
from .text import safe_reason

log = logging.getLogger(__name__)

BAD_CREDENTIALS = ("invalid_client", "unauthorized_client")  # PROTOCOLS.md: treat alike
UNAVAILABLE_ERRORS = ("temporarily_unavailable", "server_error")
REFUSALS = {
    "invalid_request": "refused the token request as malformed",
    "unsupported_grant_type": "does not allow the client credentials grant for this client",
    "invalid_grant": "refused the grant",
}
FAILURE_MEMORY = 2.0  # seconds a failed fetch is remembered: the threads queued behind it fail with it
MAX_LIFETIME = 10 * 365 * 86400
MAX_DESCRIPTION = 200
_SECONDS = re.compile(r"[0-9]{1,10}")  # ASCII only: "²".isdigit() is True
_ERROR_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,64}")
_ACCESS_TOKEN = re.compile(r"[\x21-\x7e]+")  # it goes into an Authorization header as it is


class TokenProvider(Protocol):
    def token(self) -> str: ...

    def invalidate(self, token: str) -> None: ...

    def describe(self) -> dict[str, Any]: ...


class ClientCredentialsProvider:
    """One cached access token per process, shared by all threads, fetched one at a time.

    authlib makes the OAuth request; a compliance hook reads the token endpoint's answer first, so each
    failure is diagnosed truthfully and no authlib or requests exception escapes. Freshness is kept on
    `clock` (monotonic), so renewal does not depend on the wall clock.
    """

    def __init__(
        self,
        *,
        token_url: str,
        client_id: str,
        client_secret: str,
        scopes: tuple[str, ...],
        auth_method: str,
        leeway: int,
        timeout: tuple[float, float],
        retries: int = 2,
        retry_budget: float = 8.0,
        failure_memory: float = FAILURE_MEMORY,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        refuse_sandbox: bool = False,
    ):
        self._token_url = token_url
        self._leeway = leeway
        self._retries, self._retry_budget = retries, retry_budget
        self._failure_memory = failure_memory
        self._clock, self._sleep = clock, sleep
        # No waiter can need longer than one whole fetch: its last attempt starts within the budget.
        self._longest_wait = sum(timeout) + retry_budget + 1
        self._session = OAuth2Session(
            client_id=client_id,
            client_secret=client_secret,
            token_endpoint_auth_method=auth_method,
            scope=" ".join(scopes),
            default_timeout=timeout,
        )
        # One hook: authlib keeps its hooks in a set, in no order, and the sandbox must be refused before an error
        # answer of its is read (production: a client the sandbox does not know was reported as bad credentials).
        read = _refused_sandbox_then_read if refuse_sandbox else _read_token_answer
        self._session.register_compliance_hook("access_token_response", read)
        self._session.hooks["response"].append(read_within_bounds)
        # authlib's sync client has no lock: 16 threads on a cold cache would each fetch a token.
        self._lock = threading.Lock()
        self._current: _Token | None = None
        self._failure: FlowApiError | None = None
        self._failure_until = 0.0

    def token(self) -> str:
        current = self._current
        if current and current.is_fresh(self._clock()):
            return current.access_token
        if not self._lock.acquire(timeout=self._longest_wait):
            raise UpstreamTimeout(
                "Waited too long for another request's token fetch from the identity provider",
                code="token_timeout",
            )
        try:
            return self._locked_token()
        finally:
            self._lock.release()

    def invalidate(self, token: str) -> None:
        """Drop the cached token if it is the one the API refused (not a newer one)."""
        with self._lock:
            if self._current and self._current.access_token == token:
                self._current = None

    def describe(self) -> dict[str, Any]:
        self.token()
        current = self._current
        if current is None:  # invalidated by another thread meanwhile
            return {"lifetime": None, "scopes": ""}
        return {"lifetime": current.expires_in, "scopes": current.scope}

    def _locked_token(self) -> str:
        now = self._clock()
        if self._current and self._current.is_fresh(now):
            return self._current.access_token
        if self._failure is not None and now < self._failure_until:
            # The threads that queued behind a failed fetch fail with it instead of each repeating it.
            raise copy.copy(self._failure)
        try:
            self._current = self._fetch()
        except FlowApiError as error:
            self._failure, self._failure_until = copy.copy(error), self._clock() + self._failure_memory
            raise
        self._failure = None
        return self._current.access_token

    def _fetch(self) -> "_Token":
        """A new token, retrying a 429, a 5xx or a failed connection within the retry budget."""
        deadline = self._clock() + self._retry_budget
        attempt = 0
        while True:
            try:
                return self._fetch_once()
            except _Transient as transient:
                error = transient.error
                delay = wait_before_retry(attempt, transient.retry_after)
                if attempt >= self._retries or self._clock() + delay > deadline:
                    raise error from None
            log.warning("flowapi: token request failed (%r), retrying in %.2f s", error.support_code, delay)
            self._sleep(delay)
            attempt += 1

    def _fetch_once(self) -> "_Token":
        """One token request, counted by its outcome."""
        try:
            token = self._request_token()
        except (_Transient, FlowApiError) as failure:
            metrics.count_token_fetch(outcome_kind(failure.error if isinstance(failure, _Transient) else failure))
            raise
        metrics.count_token_fetch("ok")
        return token

    def _request_token(self) -> "_Token":
        started = self._clock()
        try:
            # A redirect is not followed: it would send the client secret to whatever address it names.
            answer = self._session.fetch_token(self._token_url, grant_type="client_credentials", allow_redirects=False)
        except requests.exceptions.SSLError:
            raise UpstreamUnavailable(
                "The identity provider's TLS certificate cannot be verified", code="tls"
            ) from None
        except requests.ConnectTimeout:
            raise _Transient(
                UpstreamTimeout("Timed out connecting to the identity provider", code="token_connect_timeout")
            ) from None
        except requests.Timeout:
            # Not retried: this attempt already took the whole read timeout.
            raise UpstreamTimeout("The identity provider did not answer in time", code="token_timeout") from None
        except AnswerTooLarge as failure:
            raise UpstreamProtocolError(
                f"The identity provider's answer is too large: {failure}", code="token_too_large"
            ) from None
        except requests.RequestException as failure:
            raise _Transient(
                UpstreamUnavailable(
                    f"Cannot connect to the identity provider ({type(failure).__name__})", code="token_unreachable"
                )
            ) from None
        except OAuthError as error:  # the hook reads errors first; kept so none can escape untyped
            raise _oauth_error(error.error, _description(error.description), None) from None
        except (ValueError, TypeError, OverflowError):
            raise UpstreamProtocolError(
                "The identity provider's token answer cannot be read", code="token_malformed"
            ) from None
        token = _Token.of(answer, leeway=self._leeway, fetched_at=started)
        log.info(
            "flowapi: fetched an access token (expires_in=%s, took %.0f ms)",
            token.expires_in,
            (self._clock() - started) * 1000,
        )
        return token


@dataclass(frozen=True)
class _Token:
    access_token: str
    expires_in: int | float | None
    scope: str
    renew_at: float | None  # on the provider's clock; None: no lifetime given, renewed on a 401 only

    @classmethod
    def of(cls, answer: dict[str, Any], *, leeway: float, fetched_at: float) -> "_Token":
        lifetime = _lifetime(answer.get("expires_in"))
        # A leeway as long as the lifetime would fetch a token for every call: renew at half-life at the earliest.
        renew_at = None if lifetime is None else fetched_at + lifetime - min(leeway, lifetime / 2)
        scope = answer.get("scope")
        return cls(answer["access_token"], lifetime, scope if isinstance(scope, str) else "", renew_at)

    def is_fresh(self, now: float) -> bool:
        return self.renew_at is None or now < self.renew_at


class _Transient(Exception):
    """A failed token attempt worth repeating (429, 5xx, no connection), with the wait the server asked for."""

    def __init__(self, error: FlowApiError, retry_after: float | None = None):
        super().__init__(str(error))
        self.error, self.retry_after = error, retry_after


def _refused_sandbox_then_read(response: requests.Response) -> requests.Response:
    return _read_token_answer(_refuse_sandbox(response))


def _refuse_sandbox(response: requests.Response) -> requests.Response:
    """authlib's `access_token_response` hook: a token endpoint of the Flow Portal sandbox is refused."""
    refusal = sandbox_refusal(response, "FLOW_OIDC_URL (or FLOW_TOKEN_URL)")
    if refusal:
        raise refusal
    return response


def _read_token_answer(response: requests.Response) -> requests.Response:
    """authlib's `access_token_response` hook: raise a typed error for anything but a usable token."""
    body = _json_object(response)
    error = body.get("error") if body else None
    description = _description(body.get("error_description")) if body else None
    _refuse_for_now(response, error, description)
    if error is not None:
        raise _oauth_error(error, description, response.status_code)
    body = _usable(response, body)
    kind = body.get("token_type")
    if kind is not None and (not isinstance(kind, str) or kind.strip().lower() != "bearer"):
        # The spec's only type; the API is asked with it as a Bearer token all the same (a stand-in's "mac": unsaid)
        log.warning("flowapi: the identity provider's token_type %s is not Bearer: sent as one", _shown(kind))
    return _with_a_readable_lifetime(response, body)


def _with_a_readable_lifetime(response: requests.Response, body: dict[str, Any]) -> requests.Response:
    """The answer with its `expires_in` as `_lifetime` reads it: authlib converts it with int(), and an answer it
    cannot convert ("5m", an object) would fail a token the API may well take."""
    raw = body.get("expires_in")
    lifetime = _lifetime(raw)
    if lifetime != raw or type(lifetime) is not type(raw):
        if lifetime is None:
            del body["expires_in"]
        else:
            body["expires_in"] = lifetime
        response._content = json.dumps(body).encode()  # what authlib reads next (requests keeps the body there)
    return response


def _refuse_for_now(response: requests.Response, error: Any, description: str | None) -> None:
    """_Transient for an answer worth asking again later: slow down (429), unavailable (5xx or its OAuth error)."""
    status = response.status_code
    if status == 429:
        retry_after = _retry_after(response)
        raise _Transient(
            RateLimited(
                _sentence("The identity provider asks us to slow down (HTTP 429)", description),
                status=status,
                code=_error_code(error) if error else "token_rate_limited",
                reason=description,
                retry_after=retry_after,
            ),
            retry_after,
        )
    if status >= 500 or error in UNAVAILABLE_ERRORS:
        raise _Transient(
            UpstreamUnavailable(
                _sentence(f"The identity provider is unavailable (HTTP {status})", description),
                status=status,
                code=_error_code(error) if error else "token_unavailable",
                reason=description,
            ),
            _retry_after(response),
        )


def _usable(response: requests.Response, body: dict[str, Any] | None) -> dict[str, Any]:
    """The answer's JSON object when it holds an access token, else UpstreamProtocolError: a redirect, a 404, not
    JSON, no token."""
    status = response.status_code
    if 300 <= status < 400:
        target = origin_of(response.headers.get("Location"), response.url)
        raise UpstreamProtocolError(
            f"The identity provider answered the token request with a redirect (HTTP {status} to {target}), not "
            "followed: the client secret goes only to the configured address. Set FLOW_TOKEN_URL, or FLOW_OIDC_URL "
            "and FLOW_REALM, to the token endpoint itself",
            status=status,
            code="token_redirect",
        )
    if status == 404:
        raise UpstreamProtocolError(
            "The identity provider has no token endpoint at this address (HTTP 404): "
            "check FLOW_TOKEN_URL, or FLOW_OIDC_URL and FLOW_REALM",
            status=status,
            code="token_not_found",
        )
    if body is None and status == 401:  # an HTML login page, say: still a refusal of the client's credentials
        raise Unauthorized(
            "The identity provider refused the client id or secret (FLOW_CLIENT_ID / FLOW_CLIENT_SECRET): HTTP 401 "
            "without an OAuth answer",
            status=status,
            code="token_unauthorized",
        )
    if body is None:
        raise UpstreamProtocolError(
            f"The identity provider's answer (HTTP {status}) is not a JSON object",
            status=status,
            code="token_malformed",
        )
    if not 200 <= status < 300:
        raise UpstreamProtocolError(
            f"The identity provider answered HTTP {status} without an OAuth error",
            status=status,
            code="token_malformed",
        )
    if not isinstance(body.get("access_token"), str) or not _ACCESS_TOKEN.fullmatch(body["access_token"]):
        raise UpstreamProtocolError(
            "The identity provider's answer has no usable access_token", status=status, code="token_malformed"
        )
    return body


def origin_of(location: str | None, requested: str) -> str:
    """Where a redirect points (a relative one from the address asked), as scheme, host and port: its path and query
    may carry anything."""
    if not location:
        return "an address it did not name"
    try:
        parts = urlsplit(urljoin(requested, location.strip()))
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "an address no URL parser reads"
    return (
        f"{parts.scheme}://{parts.hostname}{port}" if parts.scheme and parts.hostname else "an address it did not name"
    )


def _json_object(response: requests.Response) -> dict[str, Any] | None:
    try:
        body = response.json()
    except (ValueError, RecursionError):
        return None
    return body if isinstance(body, dict) else None


def _lifetime(value: object) -> int | float | None:
    """`expires_in` as seconds: a number or a string of ASCII digits, at most `MAX_LIFETIME`; None when absent (RFC
    6749 §5.1) or unreadable ("5m", 0, -5), which leaves the token in use until the API refuses it (then renewed
    once, as a token without a lifetime). Either is logged: refusing the token stopped every page (a stand-in)."""
    if value is None:
        return None
    seconds: int | float | None = None
    if isinstance(value, str) and _SECONDS.fullmatch(value.strip()):
        seconds = int(value.strip())
    elif (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value)
    ):
        seconds = value
    if seconds is not None and seconds > MAX_LIFETIME:  # 2147483647: "never", in some identity providers' words
        log.warning("flowapi: the identity provider's expires_in %s is over ten years: renewed after ten", seconds)
        return MAX_LIFETIME
    if seconds is None or seconds <= 0:
        log.warning(
            "flowapi: the identity provider's expires_in %s is not a positive number of seconds: the token is used"
            " until the Flow API refuses it, then renewed",
            _shown(value),
        )
        return None
    return seconds


def _shown(value: object) -> str:
    """A value of the provider's answer as a log line names it: a short, cleaned repr, or its kind."""
    return _description(repr(value)[:40]) or "" if isinstance(value, str | int | float) else f"({_kind(value)})"


def _kind(value: object) -> str:
    kinds: dict[type, str] = {dict: "an object", list: "a list"}
    return kinds.get(type(value), type(value).__name__)


def _oauth_error(error: object, description: str | None, status: int | None) -> FlowApiError:
    code = _error_code(error)
    common: ErrorContext = {"status": status, "code": code, "reason": description}
    if code in BAD_CREDENTIALS:
        message = "The identity provider refused the client id or secret (FLOW_CLIENT_ID / FLOW_CLIENT_SECRET)"
        return Unauthorized(_sentence(message, description), **common)
    if code == "invalid_scope":
        message = "The identity provider refused the requested scopes (FLOW_SCOPES)"
        return InsufficientScope(_sentence(message, description), **common)
    what = REFUSALS.get(code, "refused the token request")
    return TokenRequestRefused(_sentence(f"The identity provider {what} ({code})", description), **common)


def _error_code(error: object) -> str:
    return error if isinstance(error, str) and _ERROR_CODE.fullmatch(error) else "token_error"


def _description(text: object) -> str | None:
    """The provider's `error_description` fit for a message: printable, redacted, short."""
    if not isinstance(text, str):
        return None
    reason = safe_reason("".join(character if character.isprintable() else " " for character in text))
    if reason and len(reason) > MAX_DESCRIPTION:
        reason = reason[: MAX_DESCRIPTION - 1] + "…"
    return reason


def _sentence(message: str, description: str | None) -> str:
    return f"{message}: {description}" if description else message


def _retry_after(response: requests.Response) -> float | None:
    return retry_after_seconds(response.headers.get("Retry-After"))


class SelfSignedJwtProvider:
    """A fresh RS256 JWT for every request (seed §5.3); nothing is cached or fetched."""

    def __init__(self, *, private_key: Path, kid: str, issuer: str, audience: str, lifetime: int) -> None:
        self._key = load_private_key(private_key)
        self._kid, self._issuer, self._audience, self._lifetime = kid, issuer, audience, lifetime

    def token(self) -> str:
        now = int(time.time())
        claims = {
            "iss": self._issuer,
            "aud": self._audience,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "nbf": now,
            "exp": now + self._lifetime,
        }
        return jwt.encode({"alg": "RS256", "typ": "JWT", "kid": self._kid}, claims, self._key)

    def invalidate(self, token: str) -> None:
        """Nothing to drop: the next request signs a new JWT anyway."""

    def describe(self) -> dict[str, Any]:
        return {"lifetime": self._lifetime, "scopes": "(registered with the key by the operator)"}
