"""What an error answer of the Flow Service says, whatever style it is written in.

DESIGN's `{"error", "message", "details": [{"field", "message"}]}`, RFC 7807 problem+json
(`title`, `detail`, `invalid-params: [{"name", "reason"}]`), an `errors: [...]` array (with
`field` or a JSON:API `source.pointer`), Rails' `errors: {"lastName": ["can't be blank"]}`, Google's
`error: {"message", "details": [{"fieldViolations": [{"field", "description"}]}]}`, FastAPI's
`detail: [{"loc": [..., "lastName"], "msg"}]`, a bare array of complaints, `error_description`, or plain text.
"""

import re
from dataclasses import dataclass, field
from typing import Any

from .errors import FieldError
from .text import safe_reason

_CODE = re.compile(r"[A-Za-z0-9_.:-]{1,60}")
MAX_DETAILS = 20
FIELD_KEYS = ("field", "name", "propertyPath")
GENERAL_FIELDS = ("base", "non_field_errors", "__all__")


@dataclass(frozen=True)
class Problem:
    code: str
    reason: str | None
    details: list[FieldError] = field(default_factory=list)


def read_problem(status: int, body: Any, text: str = "", request_id: str | None = None) -> Problem:
    """The error code, the service's reason and its per-field complaints, each cleaned."""
    body = _unwrapped(body)
    if not isinstance(body, dict):
        return Problem(f"http_{status}", _plain_text(text, request_id))
    details = _details(body, request_id)
    return Problem(_code(body, status), _reason(body, details, request_id), details)


# JSend's answers that are no success: {"status": "fail", "data": {field: complaint}}, {"status": "error", "message"}.
JSEND_FAILURES = ("fail", "error")


def says_it_failed(body: Any) -> bool:
    """Whether a 2xx answer's body is an error answer all the same: `"success": false`, JSend's `"status": "fail"`
    or `"error"`, or an `error` / `errors` with something in it ({"error": "validation_error", "message": …} under
    HTTP 200)."""
    if not isinstance(body, dict):
        return False
    if body.get("status") in JSEND_FAILURES:
        return True
    return body.get("success") is False or body.get("ok") is False or bool(body.get("error") or body.get("errors"))


# Names an error answer uses for itself; an answer with none of them and only words under each key is complaints
# by field (Rails' `render json: model.errors`, Django REST framework): {"lastName": ["can't be blank"]}.
_ANSWER_KEYS = frozenset(
    {"error", "errors", "message", "detail", "details", "title", "type", "status", "code", "error_description"}
    | {"invalid-params", "invalid_params", "violations", "timestamp", "path", "trace", "instance"}
)


def _unwrapped(body: Any) -> Any:
    """A bare array of complaints as `errors`; Google's `error` object as the answer itself; complaints by field at
    the top level as `errors`."""
    if isinstance(body, list):
        return {"errors": body}
    if isinstance(body, dict) and body.get("status") == "fail" and isinstance(body.get("data"), dict):
        return {"errors": body["data"], **({"message": body["message"]} if "message" in body else {})}
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return {**{key: value for key, value in body.items() if key != "error"}, **body["error"]}
    if isinstance(body, dict) and body and not _ANSWER_KEYS & body.keys() and all(map(_words, body.values())):
        return {"errors": body}
    return body


def _words(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value))


def _plain_text(text: str, request_id: str | None) -> str | None:
    text = text.strip()
    return safe_reason(text, request_id=request_id) if 0 < len(text) <= 1000 else None


def _code(body: dict[str, Any], status: int) -> str:
    errors = body.get("errors")
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    problem_type = body.get("type")
    problem_type = problem_type if isinstance(problem_type, str) else ""
    candidates = (
        body.get("error"),
        body.get("code"),
        body.get("status"),
        first.get("code"),
        problem_type.rstrip("/").rsplit("/")[-1],
    )
    for candidate in candidates:
        if isinstance(candidate, str) and _CODE.fullmatch(candidate) and candidate != "about:blank":
            return candidate
    return f"http_{status}"


def _first_reason(source: dict[str, Any], names: tuple[str, ...], request_id: str | None) -> str | None:
    for name in names:
        reason = safe_reason(source.get(name), request_id=request_id)
        if reason:
            return reason
    return None


def _reason(body: dict[str, Any], details: list[FieldError], request_id: str | None) -> str | None:
    reason = _first_reason(body, ("detail", "message", "error_description", "title", "errorMessage"), request_id)
    if reason:
        return reason
    said = body.get("error")
    if isinstance(said, str) and not _CODE.fullmatch(said):  # {"error": "The last name is missing"}: words, no code
        return safe_reason(said, request_id=request_id)
    general = [detail.message for detail in details if not detail.field]
    # With no general words, the per-field complaints are the service's whole reason.
    return "; ".join(general or [f"{d.field}: {d.message}" for d in details]) or None


def _details(body: dict[str, Any], request_id: str | None) -> list[FieldError]:
    items = _complaints(body)
    found = []
    for item in items[:MAX_DETAILS]:
        message = _first_reason(item, ("message", "reason", "detail", "title", "msg", "description"), request_id)
        if message:
            found.append(FieldError(_field_name(item), message))
    return found


def _complaints(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every complaint of the answer as an object, wherever and however the service wrote it."""
    items: list[dict[str, Any]] = []
    for key in ("details", "invalid-params", "invalid_params", "errors", "violations", "detail"):
        value = body.get(key)
        if isinstance(value, list):
            items.extend(item if isinstance(item, dict) else {"message": item} for item in value)
        elif isinstance(value, dict) and key == "errors":  # {"lastName": ["can't be blank"], "base": "..."}
            for name, words in value.items():
                field_name = "" if name in GENERAL_FIELDS else name  # Rails' and Django's words about no one field
                said = words if isinstance(words, list) else [words]
                items.extend({"field": field_name, "message": message} for message in said)
    nested = [inner for item in items for inner in item.get("fieldViolations") or () if isinstance(inner, dict)]
    return [item for item in items if "fieldViolations" not in item] + nested


def _field_name(item: dict[str, Any]) -> str:
    source = item.get("source")
    source = source if isinstance(source, dict) else {}
    location = item.get("loc")
    last = location[-1] if isinstance(location, list) and location else None
    for candidate in (*(item.get(key) for key in FIELD_KEYS), source.get("pointer"), source.get("parameter"), last):
        if isinstance(candidate, str) and candidate:
            # "/data/attributes/lastName", "body.lastName", "lastName" all name lastName
            name = re.split(r"[/.]", candidate.strip("/"))[-1]
            return "".join(character for character in name if character.isprintable())[:60]  # no CR/LF
    return ""
