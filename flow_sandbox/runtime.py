"""The sandbox's moving parts, one set per app, and the error answers its API gives."""

from dataclasses import dataclass

from flask import current_app, jsonify

from .faults import FaultBoard
from .identity import IdentityProvider
from .service import FlowService
from .settings import SandboxSettings
from .webhooks import WebhookSender


@dataclass
class Runtime:
    settings: SandboxSettings
    identity: IdentityProvider
    service: FlowService
    sender: WebhookSender
    faults: FaultBoard

    @property
    def store(self):
        return self.service.store


def runtime() -> Runtime:
    return current_app.extensions["flow_sandbox"]


class ApiError(Exception):
    """An error answer in the API's shape (DESIGN §3)."""

    def __init__(self, status: int, error: str, message: str, details=None, headers=None):
        super().__init__(message)
        self.status, self.error, self.message = status, error, message
        self.details = details or []
        self.headers = headers or {}


def validation_error(field: str, message: str) -> ApiError:
    return ApiError(400, "validation_error", f"{field}: {message}", [{"field": field, "message": message}])


def api_error_response(error: ApiError):
    body = {"error": error.error, "message": error.message, "details": error.details}
    response = jsonify(body)
    response.status_code = error.status
    response.headers.update(error.headers)
    return response
