"""HTTP to the Flow Service: one pooled session, timeouts, bounded retries, typed errors.

Retries are our own small loop rather than urllib3's `Retry`, because the whole attempt must fit
a time budget: `Retry` sleeps for whatever `Retry-After` says and knows nothing of token renewal.
"""

import json
import logging
import os
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, NewConnectionError

from .. import metrics, requestid
from ..jsondepth import MAX_DEPTH, document_deeper_than, nests_deeper_than
from .bounded import AnswerTooLarge, read_within_bounds
from .errors import (
    Conflict,
    ErrorContext,
    FlowApiError,
    InsufficientScope,
    NotFound,
    RateLimited,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    ValidationFailed,
    outcome_kind,
)
from .guard import sandbox_refusal
from .problems import read_problem
from .records import flow_id_from_path
from .retrying import retry_after_seconds, wait_before_retry
from .text import redact
from .tokens import TokenProvider, origin_of

__all__ = ["Reply", "Transport", "redact"]

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = (429, 502, 503, 504)
REQUEST_ID_HEADER = "X-Request-Id"


def environment_resolved_once(session: requests.Session, url: str) -> requests.Session:
    """The session with the environment's proxy and CA bundle for `url` read now, once, instead of at every call.

    requests looks up HTTP(S)_PROXY, NO_PROXY and REQUESTS_CA_BUNDLE on each request while `trust_env` is on
    (about 0.16 ms a call); the environment of a running portal does not change.
    """
    session.proxies.update(requests.utils.get_environ_proxies(url))
    bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
    if bundle:
        session.verify = bundle
    session.trust_env = False
    return session


@dataclass(frozen=True)
class Reply:
    """A 2xx answer: its JSON (None for an empty body) and its headers."""

    status: int
    payload: Any
    headers: dict[str, str]


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
        refuse_sandbox: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        # The retry budget and the waits between retries are on `clock` and `sleep` (tests pass their own).
        self._clock, self._sleep = clock, sleep
        self.base_url = base_url.rstrip("/")
        self.provider = provider
        self.timeout = (connect_timeout, read_timeout)
        self.retries, self.retry_budget = retries, retry_budget
        self.refuse_sandbox = refuse_sandbox  # production: never talk to the Flow Portal sandbox
        self.session = environment_resolved_once(requests.Session(), self.base_url)
        adapter = HTTPAdapter(pool_connections=2, pool_maxsize=pool_size, max_retries=0)
        self.session.mount("http://", adapter)
        self.session.mount("https://", adapter)

    def get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        """The JSON of a GET; a 2xx without a JSON body is a protocol error."""
        reply = self._send("GET", path, params=params, idempotent=True)
        if reply.payload is None:
            raise UpstreamProtocolError(
                "The Flow Service sent a body that is not JSON", status=reply.status, code="malformed_json"
            )
        return reply.payload

    def post(self, path: str, body: dict[str, Any]) -> Reply:
        """A POST's reply; its body may be empty (a `Location` header can say what was created)."""
        return self._send("POST", path, body=body, idempotent=False)

    def _token(self) -> str:
        try:
            return self.provider.token()
        except FlowApiError as error:
            error.reached_api = False  # nothing was sent to the Flow API: surely nothing was created
            raise

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        idempotent: bool,
    ) -> Reply:
        deadline = self._clock() + self.retry_budget
        attempt, renewed = 0, False
        while True:
            token = self._token()
            # The portal request's own id, so the service's logs and ours meet; a new one outside a request.
            request_id = requestid.current() or str(uuid.uuid4())
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
            delay = wait_before_retry(attempt, retry_after)
            if self._clock() + delay > deadline:
                raise error
            log.warning("flowapi: %s %s failed (%r), retrying in %.2f s", method, path, error.support_code, delay)
            self._sleep(delay)
            attempt += 1

    def _attempt(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        body: dict[str, Any] | None,
        token: str,
        request_id: str,
    ) -> tuple[Reply | FlowApiError, float | None]:
        """One request, timed and counted: the parsed answer, or a FlowApiError (with a Retry-After delay if any)."""
        started = time.monotonic()
        outcome, retry_after = self._exchange(method, path, params, body, token, request_id)
        elapsed = time.monotonic() - started
        error = outcome if isinstance(outcome, FlowApiError) else None
        metrics.observe_upstream(method, outcome_kind(error), elapsed)
        log.debug(
            "flowapi: %s %s -> %s in %.0f ms (request %s)",
            method,
            path,
            outcome.status or (error.code if error else None),
            elapsed * 1000,
            request_id,
        )
        return outcome, retry_after

    def _exchange(
        self,
        method: str,
        path: str,
        params: dict[str, Any] | None,
        body: dict[str, Any] | None,
        token: str,
        request_id: str,
    ) -> tuple[Reply | FlowApiError, float | None]:
        headers = {"Authorization": f"Bearer {token}", REQUEST_ID_HEADER: request_id, "Accept": "application/json"}
        # Prepared here with the session's headers and cookies: Session.request would merge its settings again
        # for every call (a tenth of a page's call), and the portal sets none but these.
        request = requests.Request(
            method,
            self.base_url + path,
            params=params,
            json=body,
            headers={**self.session.headers, **headers},
            cookies=self.session.cookies,
            hooks={"response": [read_within_bounds]},
        )
        try:  # preparing may refuse too (an unusable address): the same answer as the call would give
            response = self.session.send(request.prepare(), timeout=self.timeout, allow_redirects=False)
        except requests.RequestException as failure:
            return _sending_failed(failure, method, request_id), None
        refusal = self.refuse_sandbox and sandbox_refusal(response, "FLOW_API_URL", request_id)
        if refusal:
            return refusal, None
        try:
            return _parse(response, request_id, method), None
        except FlowApiError as error:
            if response.status_code not in RETRYABLE_STATUSES:
                return error, None
            # A 503's Retry-After counts as a 429's does (RFC 9110 §10.2.3): it was ignored (a stand-in).
            return _retryable(error), retry_after_seconds(response.headers.get("Retry-After"))


def _sending_failed(failure: requests.RequestException, method: str, request_id: str) -> FlowApiError:
    """What a call that got no answer to read says, retryable where asking again is safe."""
    if isinstance(failure, requests.exceptions.SSLError):
        if not _surely_before_sending(failure, method):  # the request may have been on its way
            return _retryable(_connection_failure(failure, request_id))
        return UpstreamUnavailable(
            "The Flow Service's TLS certificate cannot be verified", code="tls", request_id=request_id
        )
    if isinstance(failure, requests.ConnectTimeout):
        return _retryable(
            UpstreamTimeout("Timed out connecting to the Flow Service", code="connect_timeout", request_id=request_id)
        )
    if isinstance(failure, requests.Timeout):
        return UpstreamTimeout("The Flow Service did not answer in time", code="read_timeout", request_id=request_id)
    if isinstance(failure, AnswerTooLarge):
        return UpstreamProtocolError(
            f"The Flow Service's answer is too large: {failure}", code="too_large", request_id=request_id
        )
    if isinstance(failure, requests.exceptions.ContentDecodingError):
        return UpstreamProtocolError(
            "The Flow Service's answer cannot be decoded (its Content-Encoding)",
            code="undecodable",
            request_id=request_id,
        )
    return _retryable(_connection_failure(failure, request_id))


def _connection_failure(failure: requests.RequestException, request_id: str) -> UpstreamUnavailable:
    """Unreachable when no connection was made (the request never left: a create surely created nothing);
    otherwise the connection broke once the request was on its way, and the service may have acted on it."""
    if _never_left(failure):
        return UpstreamUnavailable(
            f"Cannot reach the Flow Service ({type(failure).__name__})", code="unreachable", request_id=request_id
        )
    return UpstreamUnavailable(
        f"The Flow Service's connection broke before its whole answer ({type(failure).__name__})",
        code="connection_lost",
        request_id=request_id,
    )


def _surely_before_sending(failure: requests.exceptions.SSLError, method: str) -> bool:
    """A TLS failure that surely came before the request was sent. urllib3 wraps every TLS error alike, one in the
    answer too (a terminator's alert, or plain HTTP, once the backend died), and OpenSSL's reason does not say which
    side of the handshake it was on either: for a request that changes something, only a refused certificate (checked
    in the handshake alone) is; for a read, no TLS spoken at all is too (the same read may simply be tried again)."""
    cause = failure.args[0] if failure.args else None
    reason = getattr(cause, "reason", cause)
    inner = reason.args[0] if isinstance(reason, Exception) and reason.args else reason
    if isinstance(inner, (ssl.SSLCertVerificationError, ssl.CertificateError)):
        return True
    no_tls = getattr(inner, "reason", None) in ("WRONG_VERSION_NUMBER", "UNSUPPORTED_PROTOCOL", "RECORD_LAYER_FAILURE")
    return no_tls and method == "GET"


def _never_left(failure: requests.RequestException) -> bool:
    """No connection made (refused, no such host, the proxy), or the request could not even be prepared."""
    if isinstance(failure, (requests.exceptions.ProxyError, ValueError)):  # ValueError: InvalidURL, InvalidHeader…
        return True
    cause = failure.args[0] if failure.args else None
    return isinstance(cause, MaxRetryError) and isinstance(cause.reason, NewConnectionError)


def _retryable(error: FlowApiError) -> FlowApiError:
    error.retryable = True
    return error


def _json_or_none(response: requests.Response) -> Any:
    if not response.content:
        return None
    try:
        # From the bytes, as JSON is read (RFC 8259: UTF-8, a byte-order mark tolerated), whatever charset the
        # Content-Type claims: requests would decode by the header and then fail on a BOM.
        return json.loads(response.content)
    except UnicodeDecodeError:
        return _json_in_declared_charset(response)
    except (ValueError, RecursionError):
        return None


def _json_in_declared_charset(response: requests.Response) -> Any:
    """JSON that is not UTF-8, read in the charset its Content-Type names (ISO-8859-1 "Øvregård"); None without one."""
    charset = requests.utils.get_encoding_from_headers(response.headers)
    if not charset or "charset" not in response.headers.get("Content-Type", "").lower():
        return None  # requests' ISO-8859-1 default for text/* is a guess, not the service's word
    try:
        return json.loads(response.content.decode(charset))
    except (LookupError, ValueError, RecursionError):
        return None


def _parse(response: requests.Response, request_id: str, method: str) -> Reply:
    status = response.status_code
    # Deeper than any answer of the spec, the pages' masking and JSON would meet Python's recursion limit (an
    # attack: a 500 at some 330 levels): a protocol error for a 2xx, an error answer's body unread.
    too_deep = nests_deeper_than(response.content, MAX_DEPTH)
    payload = None if too_deep else _json_or_none(response)
    if payload is not None and not _plain_utf8(response.content) and document_deeper_than(payload, MAX_DEPTH):
        too_deep, payload = True, None  # its brackets were not plain in the bytes (UTF-16, a declared charset)
    if too_deep and 200 <= status < 300:
        raise UpstreamProtocolError(
            f"The Flow Service sent JSON nested deeper than {MAX_DEPTH} levels",
            status=status,
            code="too_deep",
            request_id=request_id,
        )
    # What a POST made may be named by its address alone: a 201 whose body is words ("Created"), a 303 to it, or a
    # 301/302 to a flow's own address, as browsers read those after a POST (a stand-in's 302 read as an error). A
    # 301/302 elsewhere (the create's own path at https://) is the redirect it most likely is.
    location = response.headers.get("Location")
    names_what_it_made = method == "POST" and bool(location)
    sent_on_to_it = status == 303 or (status in (301, 302) and flow_id_from_path(location) is not None)
    # A 201 says "Created" whatever its body: a flow without its id, never one that "may have been created".
    said_created = method == "POST" and status == 201
    if 200 <= status < 300 or (names_what_it_made and sent_on_to_it):
        if payload is None and response.content.strip() and not (names_what_it_made or said_created):
            raise UpstreamProtocolError(
                "The Flow Service sent a body that is not JSON",
                status=status,
                code="malformed_json",
                request_id=request_id,
            )
        return Reply(status, payload, dict(response.headers))
    raise _error_for(status, payload, request_id, response)


def _plain_utf8(content: bytes) -> bool:
    """Whether JSON's brackets are plain in these bytes, as `nests_deeper_than` reads them: UTF-8 (every answer of
    the sandbox and most services), not UTF-16 or UTF-32 ("{" and a zero byte) or a charset such as cp037. Only
    the others have their document walked (a page's answers skip that walk)."""
    head = content.lstrip()[:4]
    return head[:1] in (b"{", b"[") and b"\x00" not in head


def _error_for(status: int, body: Any, request_id: str, response: requests.Response) -> FlowApiError:
    problem = read_problem(status, body, _text_of(response), request_id)
    common: ErrorContext = {"status": status, "code": problem.code, "request_id": request_id, "reason": problem.reason}
    if status in (400, 413, 422):
        return ValidationFailed(details=problem.details, **common)
    if status == 409:
        return Conflict(**common)
    if status == 401:
        return Unauthorized(**common)
    if status == 403:
        return InsufficientScope(**common)
    if status in (404, 410):
        return NotFound(**common)
    if status == 429:
        return RateLimited(retry_after=retry_after_seconds(response.headers.get("Retry-After")), **common)
    if status in (408, 504):
        return UpstreamTimeout(**common)
    if status >= 500:
        return UpstreamUnavailable(**common)
    if 300 <= status < 400:  # most likely FLOW_API_URL's http:// where the service answers at https://
        target = origin_of(response.headers.get("Location"), response.url)
        return UpstreamProtocolError(
            f"The Flow Service answered with a redirect (HTTP {status} to {target}), not followed: the token goes only "
            "to the configured address. Set FLOW_API_URL to the address the service answers at",
            **common,
        )
    return UpstreamProtocolError(f"Unexpected answer HTTP {status}", **common)


def _text_of(response: requests.Response) -> str:
    if response.headers.get("Content-Type", "").startswith(("text/plain", "application/problem")):
        return response.text[:2000]
    return ""
