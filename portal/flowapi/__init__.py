"""The Flow Service client: transport, token providers, typed results and errors."""

from .client import FlowClient, build_client
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
from .models import CreatedFlow, FlowDetail, FlowPage, FlowSummary

__all__ = [
    "CreatedFlow",
    "FieldError",
    "FlowApiError",
    "FlowClient",
    "FlowDetail",
    "FlowPage",
    "FlowSummary",
    "InsufficientScope",
    "NotFound",
    "RateLimited",
    "Unauthorized",
    "UpstreamProtocolError",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "ValidationFailed",
    "build_client",
]
