"""Injected upstream faults (`POST /sandbox/faults`), applied before API and token requests, and to
webhook deliveries (`drop_webhooks`: a change happens and its event never leaves)."""

import threading
from dataclasses import dataclass

MODES = ("latency", "error", "timeout", "malformed", "rate_limit", "expire_tokens", "drop_webhooks")
TARGETS = ("api", "token", "all")
WEBHOOKS = "webhooks"  # what drop_webhooks acts on: outgoing deliveries, never a request


class InvalidFault(ValueError):
    """The fault description is not one the sandbox knows; the message says what is wrong."""


@dataclass
class Fault:
    mode: str
    target: str = "api"
    remaining: int | None = None  # requests left to affect; None: until cleared
    milliseconds: int = 0  # latency
    seconds: float = 30.0  # timeout: how long the answer is held back
    status: int = 503  # error
    retry_after: int = 1  # rate_limit
    lifetime: int | None = None  # expire_tokens: new tokens die this early

    def applies_to(self, target: str) -> bool:
        # expire_tokens acts once, on the identity provider, when it is set
        if self.mode == "drop_webhooks" or target == WEBHOOKS:
            return self.mode == "drop_webhooks" and target == WEBHOOKS
        return self.mode != "expire_tokens" and self.target in ("all", target)

    def public(self) -> dict:
        return {key: value for key, value in vars(self).items() if value is not None}


def _bounded(spec: dict, name: str, low: float, high: float, default, kind=int):
    value = spec.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise InvalidFault(f"{name} must be a number from {low} to {high}")
    return kind(value)


def parse_fault(spec) -> Fault:
    if not isinstance(spec, dict):
        raise InvalidFault("the body must be a JSON object with a mode")
    mode = spec.get("mode")
    target: str = spec.get("target", "api")  # a str once it is found in TARGETS below
    if mode not in MODES:
        raise InvalidFault(f"mode must be one of {', '.join(MODES)}")
    if target not in TARGETS:
        raise InvalidFault(f"target must be one of {', '.join(TARGETS)}")
    return Fault(
        mode=mode,
        target={"expire_tokens": "all", "drop_webhooks": WEBHOOKS}.get(mode, target),
        remaining=_bounded(spec, "count", 1, 1_000_000, None),
        milliseconds=_bounded(spec, "ms", 0, 120_000, 500),
        seconds=_bounded(spec, "seconds", 0, 600, 30.0, kind=float),
        status=_bounded(spec, "status", 500, 599, 503),
        retry_after=_bounded(spec, "retry_after", 0, 3600, 1),
        lifetime=_bounded(spec, "lifetime", 1, 86_400, None),
    )


class FaultBoard:
    """The active faults; each request takes the ones that apply to it, using up counted ones."""

    def __init__(self):
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def add(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def active(self) -> list[dict]:
        with self._lock:
            return [fault.public() for fault in self._faults]

    def take(self, target: str) -> list[Fault]:
        with self._lock:
            taken = [fault for fault in self._faults if fault.applies_to(target)]
            for fault in taken:
                if fault.remaining is not None:
                    fault.remaining -= 1
            self._faults = [fault for fault in self._faults if fault.remaining != 0]
            return taken
