"""An alternative Flow Service for the tests: spec-conformant, written apart from the portal and its sandbox.

Where `flow-service-spec.md` says "not shown" it decides differently from the sandbox, and each of
those decisions is a switch in `AltOptions`, changeable while it serves:

    app = create_alt_service(AltOptions(paging="offset"))
    alt = app.extensions["alt"]          # an AltService: options, flows, requests
    alt.set(has_more="missing")          # flip switches between page loads

It imports nothing from the portal or its sandbox on purpose: a second, independent reading of the spec.
"""

import base64
import binascii
import json
import secrets
import socket
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import urlencode

from flask import Flask, Response, jsonify, request

REALM = "alt"
CLIENT_ID = "alt-client"
CLIENT_SECRET = "alt-secret"
# The portal settings that point it at this service's realm and client (beside its URL).
PORTAL_SETTINGS = {"FLOW_REALM": REALM, "FLOW_CLIENT_ID": CLIENT_ID, "FLOW_CLIENT_SECRET": CLIENT_SECRET}
ORGANIZATION = "alt-org"
DEFAULT_LIMIT = 10
HARD_MAX_LIMIT = 100
FIRST_NUMBER = 30  # flow numbers of the seeded flows run from here (30..56 by default: 42 is among them)
SEED_TIME = datetime(2026, 11, 22, 12, 5, 0, 123000, tzinfo=UTC)
OSLO_WINTER = timezone(timedelta(hours=1))

CHOICES = {
    "paging": (
        "cursor",
        "cursor_inclusive",
        "ignore_before",
        "ignore_cursor",
        "next_cursor",
        "next_link",
        "links_next",
        "offset",
        "empty_endless",
        "empty_then_seen",
    ),
    "has_more": ("bool", "missing", "string", "words", "odd", "false"),
    "items": (
        "full",
        "no_id",
        "empty",
        "masked",
        "date_only",
        "upper_case",
        "numbered",
        "typed_status",
        "overridden_reference",
        "typed_names",
    ),
    "archived_default": ("current", "all"),
    "error_style": ("design", "problem", "errors_array", "rails", "google", "fastapi", "bare_array", "java", "text"),
    "create": (
        "design",
        "location_only",
        "accepted_links",
        "no_id",
        "unusable_id",
        "conflict",
        "invalid",
        "not_found",
        "lost_answer",
        "dropped",
        "bad_gzip",
        "ok_with_error",
        "success_false",
        "jsend_error",
        "jsend_fail",
        "operation_location",
        "task_id",
        "text_created",
        "see_other",
        "found",
        "found_elsewhere",
        "enveloped",
    ),
    "detail": (
        "spec",
        "quirky",
        "offset_times",
        "upper_case",
        "disagreeing",
        "other_id",
        "upper_id",
        "id_on_flow",
        "american",
        "latin1",
        "mistyped",
        "overridden_reference",
    ),
    "token": ("ok", "refuse", "invalid_request", "unavailable", "slow_down", "endless", "redirect"),
    "list_body": ("whole", "endless", "trickle", "data_null"),
}


@dataclass
class AltOptions:
    """The service's choices where the spec is silent; see CHOICES for the values of the text switches."""

    current: int = 23
    archived: int = 4
    paging: str = "cursor"
    has_more: str = "bool"
    items: str = "full"
    archived_default: str = "current"
    max_limit: int | None = None
    error_style: str = "design"
    create: str = "design"
    detail: str = "spec"
    list_status: int | None = None
    token: str = "ok"
    expires_in: Any = 300  # sent as given: 300, "5m", ...
    byte_order_mark: bool = False  # the list's JSON begins with one (UTF-8 BOM)
    archived_retrieve: int | None = None  # an archived flow retrieved: this status (404, 410) instead of the flow
    ignore_archived: bool = False  # the list's archived parameter ignored: the current flows whatever it says
    oversized: int = 1  # a page holds this many times the flows asked for
    cursor_padding: int = 0  # characters of padding in each cursor the service makes (long continuation tokens)
    list_body: str = "whole"  # "endless": the list's JSON never ends; "trickle": it comes a few bytes at a time
    page_cap: int | None = None  # a page holds at most this many flows, whatever limit was asked (no refusal)
    understated_total: int = 0  # offset paging: the total it says is this many fewer than the flows it has

    def __post_init__(self):
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, not {getattr(self, name)!r}")


@dataclass
class AltFlow:
    id: str
    number: int
    national_id: str
    last_name: str
    status: str
    created_at: datetime
    updated_at: datetime
    archived: bool = False
    incidents: list[dict] = field(default_factory=list)
    redirect_url: str = "https://lender.example/done"
    webhook_url: str = ""

    @property
    def reference_id(self) -> str:
        return f"AL-{self.number}"


@dataclass(frozen=True)
class Seen:
    """One request the service answered: which endpoint, its query and the status it got."""

    endpoint: str
    method: str
    path: str
    args: dict
    status: int


class AltService:
    """State of one alternative service: its switches, its flows (newest first), what it was asked."""

    def __init__(self, options: AltOptions):
        self.options = options
        self.url = ""  # set by whoever serves it (the tests' `alt` fixture)
        self.lock = threading.Lock()
        self.requests: list[Seen] = []
        self.tokens: dict[str, float] = {}
        self.flows: list[AltFlow] = seed_flows(options.current, options.archived)

    def set(self, **switches) -> None:
        """Change switches by name; an unknown name or value is a test bug, so it raises."""
        known = {item.name for item in fields(AltOptions)}
        for name, value in switches.items():
            if name not in known:
                raise AttributeError(f"AltOptions has no switch {name!r}")
            if name in CHOICES and value not in CHOICES[name]:
                raise ValueError(f"{name} must be one of {CHOICES[name]}, not {value!r}")
            setattr(self.options, name, value)

    @property
    def counts(self) -> Counter:
        """Requests per endpoint: token, list, create, retrieve."""
        return Counter(seen.endpoint for seen in self.requests)

    def asked(self, endpoint: str) -> list[Seen]:
        return [seen for seen in self.requests if seen.endpoint == endpoint]

    def current_ids(self) -> list[str]:
        return [flow.id for flow in self.flows if not flow.archived]

    def archived_ids(self) -> list[str]:
        return [flow.id for flow in self.flows if flow.archived]

    def by_number(self, number: int) -> AltFlow:
        return next(flow for flow in self.flows if flow.number == number)

    def find(self, flow_id: str) -> AltFlow | None:
        return next((flow for flow in self.flows if flow.id == flow_id), None)


# -- seed data -----------------------------------------------------------------------------------


def fodselsnummer(birth: datetime, individual: int) -> str | None:
    """A valid Norwegian fødselsnummer for that birth date and individual number, or None if none exists."""
    digits = [int(d) for d in birth.strftime("%d%m%y") + f"{individual:03d}"]
    first = 11 - sum(w * d for w, d in zip((3, 7, 6, 1, 8, 9, 4, 5, 2), digits, strict=True)) % 11
    first = 0 if first == 11 else first
    if first == 10:
        return None
    digits.append(first)
    second = 11 - sum(w * d for w, d in zip((5, 4, 3, 2, 7, 6, 5, 4, 3, 2), digits, strict=True)) % 11
    second = 0 if second == 11 else second
    return None if second == 10 else "".join(map(str, digits)) + str(second)


def national_ids():
    """Endless valid fødselsnummer, a few people born in the 1980s."""
    day = datetime(1986, 10, 15)
    while True:
        for individual in range(495, 500):
            number = fodselsnummer(day, individual)
            if number:
                yield number
        day += timedelta(days=37)


STATUSES = ("Unopened", "Opened", "Accepted", "Rejected")


def seed_flows(current: int, archived: int) -> list[AltFlow]:
    """`current` + `archived` flows, newest first; the archived ones spread among the current ones."""
    total = current + archived
    # floor((k + 1/2) * total / archived): distinct positions, since total / archived >= 1
    archived_at = {int((k + 0.5) * total / archived) for k in range(archived)}
    people = national_ids()
    flows = []
    for position in range(total):
        number = FIRST_NUMBER + total - 1 - position
        created = SEED_TIME - timedelta(minutes=41 * position)
        flow = AltFlow(
            id=str(uuid.UUID(int=secrets.randbits(128), version=4)),
            number=number,
            national_id=next(people),
            last_name="Nordmann",
            status=STATUSES[number % 4],
            created_at=created,
            updated_at=created + timedelta(minutes=5, milliseconds=321),
            archived=position in archived_at,
        )
        if number % 2 == 0:
            flow.incidents = [incident(f"Webhook delivery for AL-{number} failed after 5 attempts")]
        flows.append(flow)
    return flows


def incident(message: str) -> dict:
    return {
        "id": str(uuid.uuid4()),
        "message": message,
        "taskType": "send-initiate-webhook",
        "taskCategory": "incident",
    }


# -- errors in the configured style --------------------------------------------------------------

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    409: "Conflict",
    422: "Unprocessable Entity",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
JAVA_EXCEPTIONS = {
    400: "java.lang.IllegalArgumentException",
    401: "java.lang.SecurityException",
    404: "java.lang.IllegalArgumentException",
    409: "java.lang.IllegalStateException",
    422: "java.lang.IllegalArgumentException",
}


def error_response(style: str, status: int, code: str, message: str, problems=()) -> Response:
    """A 4xx/5xx body in one of the styles real services use; `problems` are (field, message) pairs."""
    problems = list(problems)
    if style == "design":
        details = [{"field": name, "message": text} for name, text in problems]
        return _json({"error": code, "message": message, "details": details}, status)
    if style == "problem":
        body = {
            "type": f"https://alt.example/problems/{code}",
            "title": TITLES.get(status, "Error"),
            "status": status,
            "detail": message,
        }
        if problems:
            body["invalid-params"] = [{"name": name, "reason": text} for name, text in problems]
        return _json(body, status, "application/problem+json")
    if style == "errors_array":
        errors = [{"code": code, "message": text, "field": name} for name, text in problems]
        return _json({"errors": errors or [{"code": code, "message": message}]}, status)
    if style == "rails":  # complaints by field; the general ones under "base"
        errors: dict[str, list[str]] = {"base": [message]}
        for name, text in problems:
            errors.setdefault(name, []).append(text)
        return _json({"errors": errors}, status)
    if style == "google":
        violations = [{"field": name, "description": text} for name, text in problems]
        error = {"code": status, "message": message, "status": code.upper()}
        if violations:
            error["details"] = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}]
        return _json({"error": error}, status)
    if style == "fastapi":
        if problems:
            return _json(
                {"detail": [{"loc": ["body", name], "msg": text, "type": code} for name, text in problems]}, status
            )
        return _json({"detail": message}, status)
    if style == "bare_array":
        return _json([{"field": name, "message": text} for name, text in problems] or [{"message": message}], status)
    if style == "java":
        exception = JAVA_EXCEPTIONS.get(status, "java.lang.NullPointerException")
        reason = problems[0][1] if problems else message
        trace = (
            f"{exception}: {reason}\n"
            "\tat com.flow.api.FlowController.list(FlowController.java:88)\n"
            "\tat com.flow.api.FlowController$$SpringCGLIB$$0.invoke(<generated>)\n"
            "\tat org.springframework.web.servlet.FrameworkServlet.service(FrameworkServlet.java:885)"
        )
        return _json({"message": trace}, status)
    lines = [message] + [f"{name}: {text}" for name, text in problems]
    return Response("\n".join(lines) + "\n", status, content_type="text/plain; charset=utf-8")


def _json(body, status: int, content_type: str = "application/json", headers: dict | None = None) -> Response:
    return Response(json.dumps(body), status, content_type=content_type, headers=headers)


class Refused(Exception):
    """An answer in the configured error style, raised from anywhere in a view."""

    def __init__(self, status: int, code: str, message: str, problems=()):
        super().__init__(message)
        self.status, self.code, self.message, self.problems = status, code, message, list(problems)


# -- the wire shapes ----------------------------------------------------------------------------


def iso_ms(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso_offset(moment: datetime) -> str:
    local = moment.astimezone(OSLO_WINTER)
    return local.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}+01:00"


def list_item(flow: AltFlow, shape: str) -> dict:
    if shape == "empty":
        return {}
    item = {
        "id": flow.id,
        "nationalId": flow.national_id,
        "organizationId": ORGANIZATION,
        "status": flow.status,
        "referenceId": flow.reference_id,
        "createdAt": iso_ms(flow.created_at),
    }
    if shape == "no_id":
        del item["id"]
    if shape == "masked":  # as some services list a person: the birth date only
        item["nationalId"] = flow.national_id[:6] + "*****"
    if shape == "date_only":
        item["createdAt"] = flow.created_at.date().isoformat()
    if shape == "upper_case":
        item["status"] = flow.status.upper()
    if shape == "typed_status" and flow.number % 2:  # the status in a list, every other flow
        item["status"] = [flow.status]
    if shape == "typed_names" and flow.number % 2:  # a reference and a national id of other types, every other flow
        item["referenceId"], item["nationalId"] = flow.number + 0.5, {"value": "kept-out"}
    if shape == "overridden_reference":
        item["referenceId"] = overridden(flow.reference_id)
    if shape == "numbered":  # a row number as `id`, the flow's own id as `flowId`
        item["id"], item["flowId"] = str(flow.number), flow.id
    return item


def overridden(reference: str) -> str:
    """The reference with its number in a right-to-left override: "AL-56" written so that it reads "AL-65"."""
    prefix, number = reference.split("-")
    return f"{prefix}-\u202e{number}\u202c"


def retrieve_body(flow: AltFlow, style: str) -> dict:
    """The retrieve response of spec §2.4, with the quirks of `style`."""
    incidents: Any = {entry["id"]: entry for entry in flow.incidents}
    number: Any = flow.number
    created: Any = iso_ms(flow.created_at)
    updated: Any = iso_ms(flow.updated_at)
    if style == "quirky":
        incidents = list(flow.incidents)
        number = str(flow.number)
        created = int(flow.created_at.timestamp())
        updated = int(flow.updated_at.timestamp() * 1000)
    elif style == "offset_times":
        created, updated = iso_offset(flow.created_at), iso_offset(flow.updated_at)
    state = "completed" if flow.status in ("Accepted", "Rejected") else "active"
    state = "cancelled" if flow.archived else state
    state = state.upper() if style == "upper_case" else state
    state = {"cancelled": "canceled", "completed": "complete"}.get(state, state) if style == "american" else state
    body = {
        "_links": {"self": f"/api/flows/{flow.id}", "tasks": {"href": f"/api/tasks?flowId={flow.id}"}},
        "flow": {
            "flowId": flow.id,
            "version": 3,
            "hasErrors": False,
            "hasIncidents": bool(flow.incidents),
            "incidents": incidents,
            "status": state,
            "createdAt": created,
            "updatedAt": updated,
            "numAttachments": 0,
            "_meta": {
                "processDefinitionId": "loan-application:7:abc",
                "processInstanceId": str(uuid.uuid5(uuid.NAMESPACE_URL, flow.id)),
                "processVersion": "7",
            },
            "flowDefinitionId": "loan-application",
            "flowNumber": number,
            "referenceId": flow.reference_id,
            "referenceName": None,
            "versionTag": None,
            "sandbox": False,
            "sandboxConfig": {},
            "data": {
                "nationalId": flow.national_id,
                "lastName": flow.last_name,
                "redirectUrl": flow.redirect_url,
                "webhookUrl": flow.webhook_url,
                "organizationNumber": "923609016",
            },
            "actions": ["read", "assign", "cancel"],
        },
    }
    if style == "disagreeing":  # another person and reference than the list gives the same flow
        body["flow"]["referenceId"] = f"AL-{flow.number + 500}"
        body["flow"]["data"]["nationalId"] = "811218-9876"
    if style == "other_id":  # the answer calls itself by another id than the one in the path
        body["flow"]["flowId"] = OTHER_FLOW_ID
    if style == "upper_id":  # the same UUID in capitals
        body["flow"]["flowId"] = flow.id.upper()
    if style == "mistyped":  # fields of another type than the spec's
        body["flow"] |= {"status": 3, "version": "three", "sandboxConfig": "none", "actions": ["read", 7]}
        body["flow"]["incidents"] = {"i-1": 5, "i-2": None}
    if style == "overridden_reference":
        body["flow"]["referenceId"] = overridden(flow.reference_id)
    if style == "id_on_flow":  # the national id where the flow model (§2.1) has it, not under data
        body["flow"]["nationalId"] = body["flow"]["data"].pop("nationalId")
    return body


BLOCKED_REASON = "National id is blocked for new flows"
OTHER_FLOW_ID = "11111111-2222-4333-8444-555555555555"


def encode_cursor(offset: int, padding: int = 0) -> str:
    raw = json.dumps({"o": offset, "n": secrets.token_hex(4), "p": "x" * padding}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        offset = json.loads(raw)["o"]
    except (binascii.Error, ValueError, KeyError, TypeError):
        raise Refused(400, "validation_error", "cursor is not valid", [("cursor", "cursor is not valid")])
    if not isinstance(offset, int) or offset < 0:
        raise Refused(400, "validation_error", "cursor is not valid", [("cursor", "cursor is not valid")])
    return offset


# -- the app ------------------------------------------------------------------------------------


def create_alt_service(options: AltOptions | None = None) -> Flask:
    """The alternative service and its identity provider in one app; state in `app.extensions["alt"]`."""
    app = Flask("altservice")
    alt = AltService(options or AltOptions())
    app.extensions["alt"] = alt

    def record(endpoint: str, response: Response) -> Response:
        with alt.lock:
            alt.requests.append(
                Seen(endpoint, request.method, request.path, request.args.to_dict(), response.status_code)
            )
        return response

    def answer(endpoint: str, work) -> Response:
        try:
            response = work()
        except Refused as refusal:
            style = alt.options.error_style
            response = error_response(style, refusal.status, refusal.code, refusal.message, refusal.problems)
        return record(endpoint, response)

    def authorize() -> None:
        header = request.headers.get("Authorization", "")
        token = header[7:] if header[:7].lower() == "bearer " else ""
        with alt.lock:
            expires = alt.tokens.get(token)
        if expires is None or expires < time.monotonic():
            raise Refused(401, "unauthorized", "The access token is missing, unknown or expired")

    @app.post(f"/realms/{REALM}/protocol/openid-connect/token")
    def token():
        return record("token", issue_token(alt))

    @app.post("/elsewhere/token")
    def elsewhere():
        return record("elsewhere", _json({"access_token": "stolen", "expires_in": 300, "token_type": "Bearer"}, 200))

    @app.get("/api/flows")
    def list_flows():
        def work():
            authorize()
            if alt.options.list_status:
                status = alt.options.list_status
                raise Refused(status, "not_found" if status == 404 else "server_error", list_failure(status))
            return list_response(alt)

        return answer("list", work)

    @app.post("/api/flows")
    def create():
        def work():
            authorize()
            return create_response(alt)

        return answer("create", work)

    @app.get("/api/applications/<flow_id>")
    @app.get("/api/flows/<flow_id>")
    def retrieve(flow_id: str):
        def work():
            authorize()
            flow = alt.find(flow_id)
            if flow is None:
                raise Refused(404, "not_found", f"No flow with id {flow_id}")
            if flow.archived and alt.options.archived_retrieve:
                raise Refused(alt.options.archived_retrieve, "gone", "Flow is archived")
            body = retrieve_body(flow, alt.options.detail)
            if alt.options.detail == "latin1":  # JSON in the charset its Content-Type names
                latin1 = json.dumps(body, ensure_ascii=False).encode("iso-8859-1")
                return Response(latin1, 200, content_type="application/json; charset=iso-8859-1")
            return jsonify(body)

        return answer("retrieve", work)

    return app


def list_failure(status: int) -> str:
    return "No handler for GET /api/flows" if status == 404 else "The flow store did not answer"


SCOPE_REFUSAL = "Invalid scopes: loan-application:create:dk"
SECRET_REFUSAL = "Invalid client secret"


def issue_token(alt: AltService) -> Response:
    """The identity provider: client credentials by form or HTTP Basic, Keycloak-style errors."""
    if alt.options.token == "unavailable":
        return Response("Service Unavailable\n", 503, content_type="text/plain")
    if alt.options.token == "slow_down":
        return _json({"error": "slow_down", "error_description": "Too many token requests"}, 429)
    if alt.options.token == "endless":
        return Response(endless(b"{"), 200, mimetype="application/json")
    if alt.options.token == "redirect":  # elsewhere: what it is sent there is recorded as "elsewhere"
        return Response(b"", 307, headers={"Location": "/elsewhere/token"})
    client_id, secret = request.form.get("client_id"), request.form.get("client_secret")
    if request.authorization and request.authorization.type == "basic":
        client_id, secret = request.authorization.username, request.authorization.password
    if alt.options.token == "invalid_request":
        return _json({"error": "invalid_request", "error_description": SCOPE_REFUSAL}, 400)
    if request.form.get("grant_type") != "client_credentials":
        return _json({"error": "unsupported_grant_type", "error_description": "Only client_credentials"}, 400)
    if client_id != CLIENT_ID:
        return _json({"error": "invalid_client", "error_description": "Invalid client credentials"}, 401)
    if secret != CLIENT_SECRET or alt.options.token == "refuse":
        return _json({"error": "unauthorized_client", "error_description": SECRET_REFUSAL}, 401)
    access = secrets.token_urlsafe(32)
    lifetime = alt.options.expires_in if isinstance(alt.options.expires_in, int) else 300
    with alt.lock:
        alt.tokens[access] = time.monotonic() + lifetime
    return _json({"access_token": access, "token_type": "Bearer", "expires_in": alt.options.expires_in}, 200)


def read_limit(max_limit: int | None) -> int:
    raw = request.args.get("limit")
    ceiling = min(max_limit, HARD_MAX_LIMIT) if max_limit else HARD_MAX_LIMIT
    if raw is None:
        limit = DEFAULT_LIMIT
    else:
        try:
            limit = int(raw)
        except ValueError:
            limit = 0
    if limit < 1 or limit > ceiling:
        reason = f"limit must be between 1 and {ceiling}"
        raise Refused(400, "validation_error", reason, [("limit", reason)])
    return limit


def read_archived(default: str) -> bool | None:
    """True: only archived; False: only current; None: every flow (the `all` default)."""
    raw = request.args.get("archived")
    if raw is None:
        return False if default == "current" else None
    if raw.lower() not in ("true", "false"):
        raise Refused(400, "validation_error", "archived must be true or false", [("archived", "must be a boolean")])
    return raw.lower() == "true"


def list_response(alt: AltService) -> Response:
    options = alt.options
    archived = False if options.ignore_archived else read_archived(options.archived_default)
    limit = read_limit(options.max_limit) * options.oversized
    limit = min(limit, options.page_cap) if options.page_cap else limit
    with alt.lock:
        chosen = [flow for flow in alt.flows if archived is None or flow.archived == archived]
    page, more, extra = slice_page(options.paging, chosen, limit, options.cursor_padding)
    if "total" in extra:
        extra["total"] -= options.understated_total
    body: dict[str, Any] = {"data": [list_item(flow, options.items) for flow in page]}
    if options.has_more == "bool":
        body["has_more"] = more
    elif options.has_more == "string":
        body["has_more"] = "true" if more else "false"
    elif options.has_more == "words":
        body["has_more"] = "yes" if more else "no"
    elif options.has_more == "odd":  # neither yes nor no
        body["has_more"] = "maybe"
    elif options.has_more == "false":  # "no more" on every page, whatever its next link or cursor says
        body["has_more"] = False
    if options.byte_order_mark:
        return Response(b"\xef\xbb\xbf" + json.dumps(body | extra).encode(), 200, content_type="application/json")
    if options.list_body != "whole":
        pieces = BODY_STYLES[options.list_body](json.dumps(body | extra).encode())
        return Response(pieces, 200, mimetype="application/json")
    return _json(body | extra, 200)


TRICKLE_PAUSE = 0.05  # seconds between two pieces of a trickled answer
TRICKLE_PIECE = 8  # bytes


def endless(document: bytes):
    """The document's opening, then whitespace (valid inside JSON) for ever: only a reader's limit ends it."""
    yield document[:1]
    padding = b" " * 65536
    while True:
        yield padding


def trickle(document: bytes):
    """The whole document, a few bytes at a time: every piece well within any read timeout, the whole not."""
    for start in range(0, len(document), TRICKLE_PIECE):
        yield document[start : start + TRICKLE_PIECE]
        time.sleep(TRICKLE_PAUSE)


def data_null(document: bytes):
    """A list answer whose `data` is null: no array of flows at all."""
    yield json.dumps(json.loads(document) | {"data": None}).encode()


BODY_STYLES = {"endless": endless, "trickle": trickle, "data_null": data_null}


def slice_page(paging: str, chosen: list[AltFlow], limit: int, padding: int = 0) -> tuple[list[AltFlow], bool, dict]:
    """The page asked for in the paging style of the switch, whether more follow, and its extra fields."""
    if paging in ("cursor", "cursor_inclusive"):
        return cursor_page(chosen, limit, inclusive=paging == "cursor_inclusive")
    if paging == "ignore_before":  # starting_after honoured, ending_before not: the newest flows instead
        if request.args.get("ending_before"):
            return chosen[:limit], len(chosen) > limit, {}
        return cursor_page(chosen, limit)
    if paging == "ignore_cursor":
        return chosen[:limit], len(chosen) > limit, {}
    if paging == "empty_endless":  # no flows on any page, yet more said to follow, behind a new cursor every time
        return [], True, {"next_cursor": uuid.uuid4().hex}
    if paging == "empty_then_seen":  # the newest flow, two empty pages, the newest flow again, ... for ever
        step = int(request.args.get("cursor", "0-").split("-")[0] or 0)
        return chosen[:1] if step % 3 == 0 else [], True, {"next_cursor": f"{step + 1}-{uuid.uuid4().hex}"}
    if paging == "offset":
        try:
            start = int(request.args.get("offset", "0"))
        except ValueError:
            start = -1
        if start < 0:
            raise Refused(400, "validation_error", "offset must be a whole number", [("offset", "must be >= 0")])
        more = start + limit < len(chosen)
        return chosen[start : start + limit], more, {"offset": start, "total": len(chosen)}
    cursor = request.args.get("cursor")
    start = decode_cursor(cursor) if cursor else 0
    more = start + limit < len(chosen)
    token = encode_cursor(start + limit, padding) if more else None
    if paging == "next_cursor":
        return chosen[start : start + limit], more, {"next_cursor": token}
    query = {"cursor": token, "limit": limit}
    if "archived" in request.args:
        query["archived"] = request.args["archived"]
    link = f"/api/flows?{urlencode(query)}" if more else None
    if paging == "next_link":
        return chosen[start : start + limit], more, {"next": link}
    links = {"self": {"href": request.full_path.rstrip("?")}}
    if link:
        links["next"] = {"href": link}
    return chosen[start : start + limit], more, {"_links": links}


def cursor_page(chosen: list[AltFlow], limit: int, inclusive: bool = False) -> tuple[list[AltFlow], bool, dict]:
    """DESIGN §3: `starting_after` / `ending_before` flow ids, `has_more` in the direction of travel; `inclusive`:
    `starting_after` read as "from", so a page starts with the flow it names."""
    after, before = request.args.get("starting_after"), request.args.get("ending_before")
    if after and before:
        raise Refused(400, "validation_error", "starting_after and ending_before cannot be combined")
    ids = [flow.id for flow in chosen]
    for name, cursor in (("starting_after", after), ("ending_before", before)):
        if cursor and cursor not in ids:
            raise Refused(400, "validation_error", f"{name} names no flow in this list", [(name, "unknown flow id")])
    if after:
        start = ids.index(after) + (0 if inclusive else 1)
        return chosen[start : start + limit], start + limit < len(chosen), {}
    if before:
        end = ids.index(before)
        start = max(0, end - limit)
        return chosen[start:end], start > 0, {}
    return chosen[:limit], len(chosen) > limit, {}


CONFLICT_REASON = "A flow for this person is already in progress"
LAST_NAME_REASON = "lastName must contain letters only"


def create_response(alt: AltService) -> Response:
    """POST /api/flows answered the way the `create` switch says; a created flow joins the list."""
    mode = alt.options.create
    if mode == "not_found":
        raise Refused(404, "not_found", "No handler for POST /api/flows")
    body = request.get_json(silent=True)
    if not isinstance(body, dict):
        raise Refused(400, "validation_error", "The body must be a JSON object")
    missing = [name for name in ("nationalId", "lastName", "redirectUrl") if not isinstance(body.get(name), str)]
    if missing:
        raise Refused(400, "validation_error", "Required fields are missing", [(n, "is required") for n in missing])
    if mode == "conflict":
        raise Refused(409, "conflict", CONFLICT_REASON)
    if mode == "invalid":
        raise Refused(422, "validation_error", "The flow is not valid", [("lastName", LAST_NAME_REASON)])
    if mode == "ok_with_error":  # a refusal answered HTTP 200
        return _json(
            {
                "error": "validation_error",
                "message": "The flow is not valid",
                "details": [{"field": "lastName", "message": LAST_NAME_REASON}],
            },
            200,
        )
    if mode == "success_false":
        return _json({"success": False, "errorMessage": BLOCKED_REASON}, 200)
    if mode == "jsend_error":  # JSend: a failure of the service, under HTTP 200
        return _json({"status": "error", "message": BLOCKED_REASON}, 200)
    if mode == "jsend_fail":  # JSend: the request's own fault, by field
        return _json({"status": "fail", "data": {"lastName": LAST_NAME_REASON}}, 200)
    if mode == "found_elsewhere":  # the service moved (to https://): nothing made, the create's own path named
        return Response(b"", 302, headers={"Location": request.url.replace("http://", "https://", 1)})
    now = datetime.now(UTC)
    with alt.lock:
        flow = AltFlow(
            id=str(uuid.uuid4()),
            number=max((flow.number for flow in alt.flows), default=FIRST_NUMBER - 1) + 1,
            national_id=body["nationalId"],
            last_name=body["lastName"],
            status="Unopened",
            created_at=now,
            updated_at=now,
            redirect_url=body["redirectUrl"],
            webhook_url=body.get("webhookUrl") or "",
        )
        alt.flows.insert(0, flow)
    if mode == "lost_answer":  # created, and the answer lost on the way
        raise Refused(500, "internal_error", "The flow store did not answer")
    if mode == "dropped":  # created, and the connection closed without a word (a proxy's idle cut, a crash)
        request.environ["werkzeug.socket"].shutdown(socket.SHUT_RDWR)
        return Response(b"", 201)
    path = f"/api/flows/{flow.id}"
    if mode == "bad_gzip":  # created, and answered with a body its Content-Encoding does not describe
        body = json.dumps({"flowId": flow.id, "referenceId": flow.reference_id}).encode()
        return Response(body, 201, mimetype="application/json", headers={"Content-Encoding": "gzip"})
    if mode == "location_only":
        return Response(b"", 201, headers={"Location": path})
    if mode == "accepted_links":
        return _json({"_links": {"self": {"href": path}}}, 202)
    if mode == "no_id":  # created, and said so, but named by its reference alone
        return _json({"referenceId": flow.reference_id}, 201)
    if mode == "unusable_id":  # created, under an id no address can hold
        return _json({"flowId": f"flows/{flow.number} of {ORGANIZATION}"}, 201)
    if mode == "operation_location":  # accepted: an operation to poll, not the flow, at the address given
        return _json({"status": "pending"}, 202, headers={"Location": "/api/operations/op-77"})
    if mode == "task_id":  # accepted: the id given is the job's
        return _json({"id": "task-55", "state": "queued"}, 202)
    if mode == "text_created":  # created, said in words, the flow at the address given
        return Response(b"Created", 201, mimetype="text/plain", headers={"Location": path})
    if mode == "see_other":  # created, and the client sent on to it
        return Response(b"", 303, headers={"Location": path})
    if mode == "found":  # the same with 302, as browsers read it after a POST
        return Response(b"", 302, headers={"Location": path})
    if mode == "enveloped":  # the create answer inside a data envelope
        return _json({"data": {"flowId": flow.id, "referenceId": flow.reference_id}}, 201)
    return _json({"_links": {"self": {"href": path}}, "flowId": flow.id, "referenceId": flow.reference_id}, 201)
