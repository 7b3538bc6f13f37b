"""Answers read within bounds: a service or identity provider that sends without end, or a byte at a time, holds
neither a worker's memory nor its thread.

requests bounds each read from the socket by the read timeout, not the whole body, and reads a body of any size.
"""

import time
from typing import Any

import requests
from urllib3.exceptions import DecodeError, ProtocolError, ReadTimeoutError, SSLError

MAX_ANSWER_BYTES = 8 * 1024 * 1024  # a page of 100 flows is about 60 kB
_CHUNK = 64 * 1024


class AnswerTooLarge(requests.RequestException):
    """The body went past MAX_ANSWER_BYTES."""


class AnswerTooSlow(requests.Timeout):
    """The body did not arrive whole within one read timeout of its headers."""


def read_within_bounds(response: requests.Response, *args: Any, timeout: Any = None, **kwargs: Any) -> None:
    """A requests response hook: read the body now, bounded. requests runs its hooks before it reads the body
    (when not streaming), and keeps the body read here as the response's content."""
    if kwargs.get("stream") or response.raw is None:
        return
    seconds = timeout[1] if isinstance(timeout, tuple) else timeout
    deadline = time.monotonic() + seconds if seconds else None
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := _next_chunk(response):
            size += len(chunk)
            if size > MAX_ANSWER_BYTES:
                raise AnswerTooLarge(f"The answer is larger than {MAX_ANSWER_BYTES // (1024 * 1024)} MB")
            if deadline is not None and time.monotonic() > deadline:
                raise AnswerTooSlow(f"The answer did not arrive whole within {seconds:g} s")
            chunks.append(chunk)
    except requests.RequestException:
        response.close()  # the rest is never read: the connection goes, not back to the pool
        raise
    response._content = b"".join(chunks)
    response._content_consumed = True  # type: ignore[attr-defined]  # as requests marks a body it read


def _next_chunk(response: requests.Response) -> bytes:
    """One read from the socket (urllib3's read1), its errors as requests raises them for a body."""
    try:
        return response.raw.read1(_CHUNK, decode_content=True)
    except ReadTimeoutError as error:
        raise requests.exceptions.ReadTimeout(error) from None
    except SSLError as error:
        raise requests.exceptions.SSLError(error) from None
    except DecodeError as error:
        raise requests.exceptions.ContentDecodingError(error) from None
    except ProtocolError as error:
        raise requests.exceptions.ChunkedEncodingError(error) from None
