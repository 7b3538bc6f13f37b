"""Keeping a sandbox deployed by mistake harmless, and making it recognisable.

Loopback clients only unless SANDBOX_ALLOW_REMOTE=1; even then the control views (flows of every
organization, faults, the webhook log) need a loopback client or the control token, and webhooks go
only to the origins of SANDBOX_WEBHOOK_ALLOW (see `SandboxSettings.allows_webhook_to`).
"""

import ipaddress
import secrets
import socket

from flask import Flask, request

from .runtime import ApiError, runtime
from .settings import SandboxSettings

MARKER_HEADER = "X-Flow-Sandbox"  # on every answer: a production portal refuses to talk to a sandbox
# A proxy on this host makes strangers look local: a relayed request is never a loopback one.
FORWARDING_HEADERS = ("Forwarded", "X-Forwarded-For", "X-Real-IP")
CONTROL_BLUEPRINTS = ("control", "faults")
PUBLIC_CONTROL_ENDPOINTS = ("control.consent",)  # reached by an unguessable flow id, as the individual


def is_loopback_address(text: str | None) -> bool:
    try:
        address = ipaddress.ip_address((text or "").split("%")[0])
    except ValueError:
        return False
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback


def is_loopback_host(host: str) -> bool:
    """True when every address `host` resolves to is a loopback one."""
    try:
        found = socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    return bool(found) and all(is_loopback_address(str(entry[4][0])) for entry in found)


def bind_refusal(host: str, settings: SandboxSettings) -> str | None:
    """Why the sandbox must not listen on `host`, or None when it may."""
    if settings.allow_remote or is_loopback_host(host):
        return None
    return f"refusing to listen on {host}: not a loopback address (set SANDBOX_ALLOW_REMOTE=1 to allow it)"


def _from_loopback() -> bool:
    return (
        is_loopback_address(request.remote_addr)
        and not any(name in request.headers for name in FORWARDING_HEADERS)
        and _names_loopback(request.host)
    )


def _names_loopback(host: str) -> bool:
    """Whether the Host header names this machine's loopback: a browser led here by DNS rebinding names another
    host, and must not reach the control views (faults, every organization's flows) as a local client would."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]").lower()
    return name == "localhost" or name.endswith(".localhost") or is_loopback_address(name)


def _is_control_view() -> bool:
    return request.blueprint in CONTROL_BLUEPRINTS and request.endpoint not in PUBLIC_CONTROL_ENDPOINTS


def _has_control_token(settings: SandboxSettings) -> bool:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    expected = settings.control_token
    if not expected:
        return False
    return scheme.lower() == "bearer" and secrets.compare_digest(token.strip().encode(), expected.encode())


def guard_request() -> None:
    """Refuse remote clients unless allowed, and remote control without the control token."""
    if _from_loopback():
        return
    settings = runtime().settings
    if not settings.allow_remote:
        raise ApiError(403, "forbidden", "This sandbox answers loopback clients only (SANDBOX_ALLOW_REMOTE is off)")
    if _is_control_view() and not _has_control_token(settings):
        raise ApiError(
            403,
            "forbidden",
            "Sandbox control needs a loopback client or Authorization: Bearer <SANDBOX_CONTROL_TOKEN>",
            headers={"WWW-Authenticate": "Bearer"},
        )


def mark_response(response):
    response.headers[MARKER_HEADER] = "1"
    return response


def init_app(app: Flask) -> None:
    app.before_request(guard_request)
    app.after_request(mark_response)
