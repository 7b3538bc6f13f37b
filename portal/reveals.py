"""Reveal grants: after a recorded reveal, the same browser may reload the revealed page for a short while.

The session holds only flows (`flowlinks.cookie_key`), when each grant ends and the purpose stated, never a national
id: the session cookie is signed, not encrypted, so a flow id that reads as one goes in as a keyed hash.
"""

from flask import session

from . import current
from .flowlinks import cookie_key

REVEAL_WINDOW = 300  # seconds a reveal may be reloaded without being recorded again
MAX_GRANTS = 20


def _now() -> int:
    return int(current.clock()())


def grant_reveal(flow_id: str, purpose: str) -> None:
    """Let this session reload `flow_id`'s revealed page until REVEAL_WINDOW has passed."""
    now = _now()
    grants = {key: grant for key, grant in session.get("reveals", {}).items() if _until(grant) > now}
    grants[cookie_key(flow_id)] = [now + REVEAL_WINDOW, purpose]  # the purpose until the person's access log has it
    session["reveals"] = dict(sorted(grants.items(), key=lambda item: _until(item[1]))[-MAX_GRANTS:])


def reveal_is_fresh(flow_id: str) -> bool:
    return _until(session.get("reveals", {}).get(cookie_key(flow_id))) > _now()


def purpose_to_log(flow_id: str) -> str | None:
    """The purpose of a fresh reveal not yet written to the access log, once; None after that."""
    key = cookie_key(flow_id)
    grant = session.get("reveals", {}).get(key)
    if not (isinstance(grant, list) and len(grant) == 2 and grant[1]):
        return None
    session["reveals"] = session["reveals"] | {key: [grant[0], None]}
    return grant[1]


def _until(grant) -> int:
    return grant[0] if isinstance(grant, list) and grant and isinstance(grant[0], int) else 0
