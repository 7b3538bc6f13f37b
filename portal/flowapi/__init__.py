"""The Flow Service client: transport, token providers, typed results and errors."""

from .client import FlowClient, build_client
from .errors import (
    Conflict,
    EndpointNotFound,
    FieldError,
    FlowApiError,
    InsufficientScope,
    NotFound,
    RateLimited,
    SandboxInProduction,
    TokenRequestRefused,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    ValidationFailed,
)
from .records import FLOW_ID, CreatedFlow, FlowDetail, FlowPage, FlowSummary

__all__ = [
    "FLOW_ID",
    "Conflict",
    "CreatedFlow",
    "EndpointNotFound",
    "FieldError",
    "FlowApiError",
    "FlowClient",
    "FlowDetail",
    "FlowPage",
    "FlowSummary",
    "InsufficientScope",
    "NotFound",
    "RateLimited",
    "SandboxInProduction",
    "TokenRequestRefused",
    "Unauthorized",
    "UpstreamProtocolError",
    "UpstreamTimeout",
    "UpstreamUnavailable",
    "ValidationFailed",
    "build_client",
]
