"""CSV downloads: streamed as they are read, UTF-8 with a header row, every cell shown as text; from a page, laid out
for the reader's spreadsheet (`for_spreadsheets`), its yes and no in the page's language."""

import csv
import io
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from babel.numbers import get_decimal_symbol
from flask import Response, stream_with_context
from flask_babel import pgettext

from .i18n import request_words
from .masking import mask_flow_id

CHUNK_CHARS = 64 * 1024
# A cell starting with one of these is run as a formula by spreadsheet programs (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_FORMULA_AFTER_SEPARATOR = re.compile(r"([,;])([=+\-@\t\r])")


TRUE_FALSE = ("true", "false")


def csv_cell(value, yes_no: tuple[str, str] = TRUE_FALSE) -> str:
    """The cell's text: times in ISO 8601, nothing for None, a boolean as `yes_no` says it, national ids masked (a
    UUID, a flow's or an event's id, shown whole as the pages show it), an apostrophe before a formula."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return yes_no[0] if value else yes_no[1]
    text = value.isoformat() if isinstance(value, datetime) else mask_flow_id(str(value))
    return "'" + text if text.startswith(FORMULA_START) else text


@dataclass(frozen=True)
class CsvForm:
    """How the text is laid out: the character between cells, and whether it starts with a byte-order mark."""

    delimiter: str = ","
    byte_order_mark: bool = False
    # Read with the other separator (a Nordic page opened with English settings), a cell holding "x,=1+2" splits,
    # and its second part is a live formula: an apostrophe goes before a formula's sign after either separator too.
    defuse_after_separators: bool = False
    # A boolean cell (archived, has_incidents): "true"/"false" for a script, whatever the language; a spreadsheet's
    # reader reads the page's language ("ja"/"nei"), not Python's "True".
    yes_no: tuple[str, str] = TRUE_FALSE


PLAIN = CsvForm()  # for scripts: the commands' exports


def for_spreadsheets() -> CsvForm:
    """A download from a page, as the reader's spreadsheet opens it: with a byte-order mark (without one Excel reads
    UTF-8 as the Windows code page: "Ã˜stby"), and `;` between cells where the page's language writes a decimal
    comma (Norwegian, Swedish, Finnish), as Excel separates a list there; a comma in English."""
    decimal = get_decimal_symbol(request_words().language)
    yes_no = (pgettext("a CSV cell of a true value", "yes"), pgettext("a CSV cell of a false value", "no"))
    return CsvForm(
        delimiter=";" if decimal == "," else ",", byte_order_mark=True, defuse_after_separators=True, yes_no=yes_no
    )


def csv_chunks(header: Iterable[str], rows: Iterable[Iterable], form: CsvForm = PLAIN) -> Iterator[str]:
    """The header and the rows as CSV text, in chunks of about 64 KiB."""
    buffer = io.StringIO()
    if form.byte_order_mark:
        buffer.write("\ufeff")
    writer = csv.writer(buffer, delimiter=form.delimiter)
    writer.writerow(header)
    for row in rows:
        cells = [csv_cell(value, form.yes_no) for value in row]
        writer.writerow(
            [_FORMULA_AFTER_SEPARATOR.sub(r"\1'\2", cell) for cell in cells] if form.defuse_after_separators else cells
        )
        if buffer.tell() >= CHUNK_CHARS:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def csv_response(filename: str, header: Iterable[str], rows: Iterable[Iterable]) -> Response:
    """A streamed CSV attachment for the reader's spreadsheet; `rows` is read inside the request (a generator over
    the store is fine)."""
    return download_response(filename, csv_chunks(header, rows, for_spreadsheets()), "text/csv")


def download_response(filename: str, chunks: Iterable[str], mimetype: str) -> Response:
    """A streamed attachment of text chunks, read inside the request."""
    response = Response(stream_with_context(iter(chunks)), mimetype=mimetype)
    response.headers["Content-Disposition"] = f'attachment; filename="{filename}"'
    response.headers["Cache-Control"] = "no-store"
    return response
