"""The Flow Service API of seed §4, with DESIGN §3's pagination, scopes and errors."""

import unicodedata
from urllib.parse import urlsplit

from flask import Blueprint, g, jsonify, request

from .faults_views import apply_faults
from .identity import InvalidBearer
from .nationalid import InvalidNationalId, normalize
from .runtime import ApiError, runtime, validation_error
from .state import FlowNotFound

bp = Blueprint("api", __name__, url_prefix="/api")

CREATE_FIELDS = {"nationalId", "lastName", "redirectUrl", "webhookUrl"}
MAX_LAST_NAME = 100
MAX_URL = 2048


@bp.before_request
def authenticate():
    """Faults first (they stand for the network and the server), then the bearer token."""
    faulted = apply_faults("api")
    if faulted is not None:
        return faulted
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(
            401, "unauthorized", "Send Authorization: Bearer <access token>", headers={"WWW-Authenticate": "Bearer"}
        )
    try:
        g.principal = runtime().identity.verify_bearer(token.strip())
    except InvalidBearer as error:
        raise ApiError(
            401, "unauthorized", str(error), headers={"WWW-Authenticate": 'Bearer error="invalid_token"'}
        ) from None
    return None


def _limit() -> int:
    raw = request.args.get("limit", "10")
    if not (raw.isascii() and raw.isdigit()) or not 1 <= int(raw) <= 100:
        raise validation_error("limit", "must be a whole number from 1 to 100")
    return int(raw)


def _archived() -> bool:
    raw = request.args.get("archived", "false").lower()
    if raw not in ("true", "false"):
        raise validation_error("archived", "must be true or false")
    return raw == "true"


def _cursors() -> tuple[str | None, str | None]:
    after, before = request.args.get("starting_after"), request.args.get("ending_before")
    if after and before:
        raise validation_error("starting_after", "give starting_after or ending_before, not both")
    return after or None, before or None


@bp.get("/flows")
def list_flows():
    """One page of the caller's flows, newest first."""
    limit, archived, (after, before) = _limit(), _archived(), _cursors()
    try:
        page = runtime().store.page(
            g.principal.organization,
            archived=archived,
            limit=limit,
            starting_after=after,
            ending_before=before,
        )
    except FlowNotFound:
        raise validation_error(
            "starting_after" if after else "ending_before", "no flow with this id to page from"
        ) from None
    return jsonify({"has_more": page.has_more, "data": page.items})


def _url_problem(value) -> str | None:
    if not isinstance(value, str) or not value:
        return "must be a URL"
    if len(value) > MAX_URL:
        return f"must be at most {MAX_URL} characters"
    try:
        parts = urlsplit(value)
    except ValueError:
        return "is not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        return "must be an absolute http or https URL"
    return None


def _webhook_url_problem(value) -> str | None:
    problem = _url_problem(value)
    if problem is None and not runtime().settings.allows_webhook_to(value):
        return "must start with an origin listed in SANDBOX_WEBHOOK_ALLOW"  # no relay to anywhere else
    return problem


def _last_name_problem(value) -> str | None:
    if not isinstance(value, str) or not value.strip():
        return "is required"
    if len(value.strip()) > MAX_LAST_NAME:
        return f"must be at most {MAX_LAST_NAME} characters"
    if any(unicodedata.category(char) in ("Cc", "Cf") for char in value):
        return "must not contain control characters"
    return None


def _validated_create_body() -> dict:
    body = request.get_json(silent=True) if request.is_json else None
    if not isinstance(body, dict):
        raise ApiError(400, "validation_error", "The body must be a JSON object (Content-Type: application/json)")
    problems = [{"field": name, "message": "is not a known field"} for name in sorted(set(body) - CREATE_FIELDS)]
    country = national_id = None
    raw_id = body.get("nationalId")
    if not isinstance(raw_id, str) or not raw_id.strip():
        problems.append({"field": "nationalId", "message": "is required"})
    else:
        try:
            country, national_id = normalize(raw_id)
        except InvalidNationalId as error:
            problems.append({"field": "nationalId", "message": str(error)})
    checks = (
        ("lastName", _last_name_problem(body.get("lastName"))),
        ("redirectUrl", _url_problem(body.get("redirectUrl"))),
        ("webhookUrl", body.get("webhookUrl") is not None and _webhook_url_problem(body.get("webhookUrl"))),
    )
    problems += [{"field": name, "message": message} for name, message in checks if message]
    if problems:
        raise ApiError(400, "validation_error", "The flow cannot be created: see details", problems)
    return {
        "country": country,
        "national_id": national_id,
        "last_name": body["lastName"].strip(),
        "redirect_url": body["redirectUrl"],
        "webhook_url": body.get("webhookUrl"),
    }


@bp.post("/flows")
def create_flow():
    """Create a flow; needs the create scope of the national id's country."""
    fields = _validated_create_body()
    scope = f"loan-application:create:{fields['country']}"
    if scope not in g.principal.scopes:
        raise ApiError(
            403,
            "insufficient_scope",
            f"This token lacks the scope {scope}",
            headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{scope}"'},
        )
    flow = runtime().service.create(g.principal.organization, **fields)
    response = jsonify(
        {
            "_links": {"self": {"href": f"/api/flows/{flow.id}"}},
            "flowId": flow.id,
            "referenceId": flow.reference_id,
        }
    )
    response.status_code = 201
    response.headers["Location"] = f"/api/flows/{flow.id}"
    return response


def _retrieve(flow_id: str):
    try:
        runtime().store.get(flow_id, g.principal.organization)
        return jsonify(runtime().store.snapshot(flow_id, lambda flow: flow.retrieve_response()))
    except FlowNotFound:
        raise ApiError(404, "not_found", "No flow with this id") from None


@bp.get("/applications/<flow_id>")
def retrieve_application(flow_id: str):
    """Retrieve a flow at the spec's path (seed §4.3)."""
    return _retrieve(flow_id)


@bp.get("/flows/<flow_id>")
def retrieve_flow(flow_id: str):
    """Retrieve a flow where `_links.self` points."""
    return _retrieve(flow_id)


@bp.get("/tasks")
def list_tasks():
    """The flow's tasks (where `_links.tasks` points): its consent task."""
    flow_id = request.args.get("flowId", "")
    try:
        flow = runtime().store.get(flow_id, g.principal.organization)
    except FlowNotFound:
        raise validation_error("flowId", "no flow with this id") from None
    state = {"active": "pending"}.get(flow.lifecycle, flow.lifecycle)
    return jsonify({"data": [{"flowId": flow.id, "taskType": "consent", "status": state}]})
