"""Reveal grants: after a recorded reveal, the same browser may reload the revealed page for a short while.

The session holds only flow ids and when each grant ends, never a national id.
"""

from flask import current_app, session

REVEAL_WINDOW = 300  # seconds a reveal may be reloaded without being recorded again
MAX_GRANTS = 20


def _now() -> int:
    return int(current_app.extensions["portal.clock"]())


def grant_reveal(flow_id: str) -> None:
    """Let this session reload `flow_id`'s revealed page until REVEAL_WINDOW has passed."""
    now = _now()
    grants = {key: until for key, until in session.get("reveals", {}).items() if until > now}
    grants[flow_id] = now + REVEAL_WINDOW
    session["reveals"] = dict(sorted(grants.items(), key=lambda item: item[1])[-MAX_GRANTS:])


def reveal_is_fresh(flow_id: str) -> bool:
    until = session.get("reveals", {}).get(flow_id)
    return isinstance(until, int) and until > _now()
