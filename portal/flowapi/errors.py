"""Typed failures of the Flow Service the views can act on.

Messages never carry a secret, a token or a request body: they are safe to log and to show.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict, Unpack


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str


class ErrorContext(TypedDict, total=False):
    """The keyword arguments every FlowApiError takes besides its message."""

    status: int | None
    code: str | None
    request_id: str | None
    reason: str | None


class FlowApiError(Exception):
    """Base of every failure talking to the Flow Service or its identity provider."""

    #: what a person is told, in one sentence
    summary = "The Flow Service could not complete the request."
    #: set by the transport when an idempotent request may be tried again
    retryable = False
    #: False when the failure came before the Flow API was called (e.g. no token): nothing was sent
    reached_api = True
    #: the service's complaints about single fields (a validation failure fills them)
    details: Sequence[FieldError] = ()

    def __init__(
        self,
        message: str = "",
        *,
        status: int | None = None,
        code: str | None = None,
        request_id: str | None = None,
        reason: str | None = None,
    ) -> None:
        super().__init__(message or reason or self.summary)
        self.status = status
        self.code = code
        self.request_id = request_id
        #: the service's own words (already cleaned of national ids and internals), fit to show staff
        self.reason = reason

    @property
    def support_code(self) -> str:
        """The small print for support: upstream status, error code and request id."""
        parts = [str(self.status) if self.status else None, self.code, self.request_id]
        return " · ".join(part for part in parts if part)


class SandboxInProduction(FlowApiError):
    """A production portal reached the Flow Portal sandbox: its answers carry the sandbox's marker header."""

    summary = "FLOW_API_URL / FLOW_OIDC_URL point at the Flow Portal sandbox, which production never uses."


class Unauthorized(FlowApiError):
    summary = "The portal's credentials for the Flow Service were refused."


class InsufficientScope(FlowApiError):
    summary = "The portal's credentials lack the scope this needs."


class NotFound(FlowApiError):
    summary = "No such flow."


class EndpointNotFound(FlowApiError):
    """A 404 where the service must have a resource (the list, create): the address is wrong."""

    summary = "The Flow Service has nothing at this address: check FLOW_API_URL."


class Conflict(FlowApiError):
    summary = "The Flow Service refused because of the flow's current state."


class ValidationFailed(FlowApiError):
    summary = "The Flow Service rejected the input."

    def __init__(
        self, message: str = "", *, details: list[FieldError] | None = None, **kwargs: Unpack[ErrorContext]
    ) -> None:
        super().__init__(message, **kwargs)
        self.details = details or []


class RateLimited(FlowApiError):
    summary = "The Flow Service asks us to slow down."

    def __init__(self, message: str = "", *, retry_after: float | None = None, **kwargs: Unpack[ErrorContext]) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class UpstreamUnavailable(FlowApiError):
    summary = "The Flow Service is unavailable."


class UpstreamTimeout(FlowApiError):
    summary = "The Flow Service did not answer in time."


class UpstreamProtocolError(FlowApiError):
    summary = "The Flow Service sent an answer the portal cannot read."


class TokenRequestRefused(UpstreamProtocolError):
    """The identity provider refused the token request itself (`invalid_request`, `unsupported_grant_type`, ...)."""

    summary = "The identity provider refused the portal's token request."


def outcome_kind(error: FlowApiError | None) -> str:
    """A word from a small fixed set for metrics: ok, tls, timeout, connection, malformed, sandbox, http_4xx,
    http_5xx, other."""
    if error is None:
        return "ok"
    if isinstance(error, SandboxInProduction):
        return "sandbox"
    if error.code == "tls":
        return "tls"
    if error.status is None:
        for kind, word in ((UpstreamTimeout, "timeout"), (UpstreamUnavailable, "connection")):
            if isinstance(error, kind):
                return word
        return "malformed" if isinstance(error, UpstreamProtocolError) else "other"
    if 200 <= error.status < 300:
        return "malformed"  # a 2xx whose body cannot be read
    return f"http_{error.status // 100}xx"
