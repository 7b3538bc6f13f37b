"""The fault-injection control endpoints and the hook that makes a request suffer the faults."""

import time

from flask import Blueprint, Response, jsonify, request

from .faults import InvalidFault, parse_fault
from .runtime import ApiError, api_error_response, runtime

bp = Blueprint("faults", __name__, url_prefix="/sandbox")

MALFORMED_BODY = '{"data": [{"id": "'  # cut off mid-string: valid start, invalid JSON


def apply_faults(target: str):
    """Delay this request or answer it with the injected fault; None lets it through."""
    for fault in runtime().faults.take(target):
        if fault.mode == "latency":
            time.sleep(fault.milliseconds / 1000)
        elif fault.mode == "timeout":
            time.sleep(fault.seconds)  # then answer normally: the client has given up by now
        elif fault.mode == "error":
            return api_error_response(ApiError(fault.status, "upstream_error", "Injected upstream failure"))
        elif fault.mode == "rate_limit":
            return api_error_response(
                ApiError(429, "rate_limited", "Too many requests", headers={"Retry-After": str(fault.retry_after)})
            )
        elif fault.mode == "malformed":
            return Response(MALFORMED_BODY, status=200, mimetype="application/json")
    return None


@bp.post("/faults")
def add_fault():
    """Inject a fault: `{"mode": ..., "target": "api|token|all", "count": N, ...}`."""
    try:
        fault = parse_fault(request.get_json(silent=True))
    except InvalidFault as error:
        return api_error_response(ApiError(400, "validation_error", str(error)))
    runtime().faults.add(fault)
    if fault.mode == "expire_tokens":
        runtime().identity.expire_tokens(fault.lifetime)
    return jsonify({"faults": runtime().faults.active()}), 201


@bp.get("/faults")
def list_faults():
    return jsonify({"faults": runtime().faults.active()})


@bp.delete("/faults")
def clear_faults():
    runtime().faults.clear()
    runtime().identity.restore_tokens()
    return "", 204
