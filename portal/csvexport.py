"""CSV downloads: streamed as they are read, UTF-8 with a header row, every cell shown as text."""

import csv
import io
from collections.abc import Iterable, Iterator
from datetime import datetime

from flask import Response, stream_with_context

CHUNK_CHARS = 64 * 1024
# A cell starting with one of these is run as a formula by spreadsheet programs (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> str:
    """The cell's text: times in ISO 8601, nothing for None, a leading apostrophe before a formula."""
    if value is None:
        return ""
    text = value.isoformat() if isinstance(value, datetime) else str(value)
    return "'" + text if text.startswith(FORMULA_START) else text


def csv_chunks(header: Iterable[str], rows: Iterable[Iterable]) -> Iterator[str]:
    """The header and the rows as CSV text, in chunks of about 64 KiB."""
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    for row in rows:
        writer.writerow([csv_cell(value) for value in row])
        if buffer.tell() >= CHUNK_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def csv_response(filename: str, header: Iterable[str], rows: Iterable[Iterable]) -> Response:
    """A streamed attachment; `rows` is read inside the request (a generator over the store is fine)."""
    response = Response(stream_with_context(csv_chunks(header, rows)), mimetype="text/csv")
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["Cache-Control"] = "no-store"
    return response
