"""Where an event body keeps its type, flow, status and time: the configurable event shape.

`FLOW_WEBHOOK_SHAPE` picks where to look:

- `design` (DESIGN §3): `flowId`, `referenceId` and `status` in the `data` object;
- `flat`: `flowId`, `referenceId` and `status` at the top level;
- `auto` (default): in `data` first, then at the top level, so both shapes work.

In every shape the top level holds the id (`id` or else `eventId`), the type (`type` or else `event`)
and the time (`timestamp`, `occurredAt` or else `createdAt`).
`FLOW_WEBHOOK_FIELDS` overrides single fields with dotted paths: `type=event,flow_id=payload.flow.id`
(a numeric part indexes a list). Only text and numbers are read; a number becomes its text.
"""

import re
from dataclasses import dataclass
from typing import Any

SHAPES = ("auto", "design", "flat")
FIELDS = ("id", "type", "flow_id", "reference_id", "status", "timestamp")
_PATH = re.compile(r"[^\s.,=]+(\.[^\s.,=]+)*")

_TOP = {
    "id": ("id", "eventId"),
    "type": ("type", "event"),
    "timestamp": ("timestamp", "occurredAt", "createdAt"),
}
_DATA = {"flow_id": "flowId", "reference_id": "referenceId", "status": "status"}


@dataclass(frozen=True)
class EventFields:
    """What the portal reads from an event body; each value is text or None, not yet cleaned."""

    event_id: str | None = None
    event_type: str | None = None
    flow_id: str | None = None
    reference_id: str | None = None
    status: str | None = None
    timestamp: str | None = None


@dataclass(frozen=True)
class EventShape:
    name: str = "auto"
    overrides: tuple[tuple[str, str], ...] = ()

    def paths(self, field: str) -> list[str]:
        """The dotted paths tried for `field`, first match wins."""
        for name, path in self.overrides:
            if name == field:
                return [path]
        if field in _TOP:
            return list(_TOP[field])
        key = _DATA[field]
        return {"design": [f"data.{key}"], "flat": [key]}.get(self.name, [f"data.{key}", key])


def parse_fields(text: str | None) -> tuple[tuple[str, str], ...]:
    """`type=event,flow_id=payload.flow.id` as pairs; ValueError says what is wrong."""
    pairs = []
    for item in (text or "").split(","):
        if not item.strip():
            continue
        name, equals, path = (part.strip() for part in item.partition("="))
        if name not in FIELDS:
            raise ValueError(f"unknown field {name!r} (known: {', '.join(FIELDS)})")
        if not equals or not _PATH.fullmatch(path):
            raise ValueError(f"{name} needs a dotted path like {name}=data.{name}, got {path!r}")
        pairs.append((name, path))
    return tuple(pairs)


def _at(payload: Any, path: str) -> Any:
    value = payload
    for part in path.split("."):
        if isinstance(value, dict):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return None
    try:
        text = value if isinstance(value, str) else str(value)
    except ValueError:  # an integer past Python's 4300-digit conversion limit
        return None
    return text or None


def _first(payload: Any, shape: EventShape, field: str) -> str | None:
    for path in shape.paths(field):
        value = _text(_at(payload, path))
        if value is not None:
            return value
    return None


def read_event(payload: Any, shape: EventShape) -> EventFields:
    """The event's fields found where `shape` says they are."""
    return EventFields(
        event_id=_first(payload, shape, "id"),
        event_type=_first(payload, shape, "type"),
        flow_id=_first(payload, shape, "flow_id"),
        reference_id=_first(payload, shape, "reference_id"),
        status=_first(payload, shape, "status"),
        timestamp=_first(payload, shape, "timestamp"),
    )
