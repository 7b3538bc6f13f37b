"""Typed access to what `create_app` gave the app that is handling the request (or command) now.

Views and helpers call these instead of reading `current_app.extensions` by key: one place knows the keys,
and a type checker knows what each one holds.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, cast

from flask import current_app

if TYPE_CHECKING:
    from .flowapi import FlowClient
    from .settings import Settings

SETTINGS = "portal.settings"
FLOW_CLIENT = "flow_client"
CLOCK = "portal.clock"  # seconds since the epoch; tests put a clock of their own here


def settings() -> Settings:
    """The validated DESIGN §2 settings."""
    return cast("Settings", current_app.extensions[SETTINGS])


def flow_client() -> FlowClient:
    """The Flow Service client (one per app: its token is shared by every request)."""
    return cast("FlowClient", current_app.extensions[FLOW_CLIENT])


def clock() -> Callable[[], float]:
    return cast("Callable[[], float]", current_app.extensions[CLOCK])


def now() -> datetime:
    """The app's clock as an aware UTC moment."""
    return datetime.fromtimestamp(clock()(), timezone.utc)
