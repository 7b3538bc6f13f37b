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
    request_id = incoming if incoming is not None and usable else uuid.uuid4().hex
    _current.set(request_id)
    return request_id


def end() -> None:
    """Forget the id: a worker thread serves other requests next."""
    _current.set(None)


def current() -> str | None:
    """The id of the request being served, None outside a request."""
    return _current.get()
