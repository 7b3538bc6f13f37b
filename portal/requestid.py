"""The current request's id, readable without Flask: by the log formatter and the Flow Service client."""

import re
import uuid
from contextvars import ContextVar

from .masking import mask_text

HEADER = "X-Request-Id"
_ACCEPTED = re.compile(r"[A-Za-z0-9._-]{1,64}")
_current: ContextVar[str | None] = ContextVar("portal_request_id", default=None)


def begin(incoming: str | None) -> str:
    """Make the caller's id (when well-formed, and no national id) or a new one the id of this request; return it."""
    usable = incoming is not None and _ACCEPTED.fullmatch(incoming) and mask_text(incoming) == incoming
    request_id = incoming if incoming is not None and usable else new_id()
    _current.set(request_id)
    return request_id


def new_id() -> str:
    """A random id that no log line masks: about one in 2,000 uuid4 hex strings holds a run of digits that reads as
    a national id, and the log then showed another id than the page's "for support" code."""
    for _ in range(8):
        candidate = uuid.uuid4().hex
        if mask_text(candidate) == candidate:
            return candidate
    return candidate.translate(_LETTERS_FOR_DIGITS)  # (one in 2,000 to the eighth) no digits, nothing to mask


_LETTERS_FOR_DIGITS = str.maketrans("0123456789", "ghijklmnop")


def end() -> None:
    """Forget the id: a worker thread serves other requests next."""
    _current.set(None)


def current() -> str | None:
    """The id of the request being served, None outside a request."""
    return _current.get()
