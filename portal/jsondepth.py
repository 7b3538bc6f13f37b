"""How deep a JSON text nests, read without recursion. What the portal takes from outside (a webhook, an answer of
the Flow Service) nests at most `MAX_DEPTH` levels: deeper, the code that walks it (masking, the pages' JSON)
would meet Python's recursion limit."""

import re
from typing import Any

MAX_DEPTH = 64
_JSON_TOKEN = re.compile(rb'\\.|["\[\]{}]', re.DOTALL)  # an escape, a quote or a bracket; never backtracks


def nests_deeper_than(body: bytes, limit: int) -> bool:
    """Whether the brackets of a JSON text nest past `limit`, brackets in strings ignored; no recursion."""
    if body.count(b"[") + body.count(b"{") <= limit:
        return False
    depth = 0
    in_string = False
    for match in _JSON_TOKEN.finditer(body):
        token = match.group()
        if token == b'"':
            in_string = not in_string
        elif in_string or len(token) == 2:
            continue
        elif token in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


def document_deeper_than(document: Any, limit: int) -> bool:
    """Whether a document JSON was read into nests its lists and objects past `limit`; no recursion. For a text the
    bytes do not show the brackets of (UTF-16 or UTF-32, a charset its Content-Type names): there an escaped quote
    ("\\"" is a backslash, a zero byte, a quote) put `nests_deeper_than` out of step, and 400 levels went through."""
    pending = [(document, 1)]
    while pending:
        value, depth = pending.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        pending.extend((child, depth + 1) for child in children)
    return False
