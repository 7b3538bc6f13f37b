"""A production portal refuses to talk to the Flow Portal sandbox, which marks every answer it gives."""

import requests

from .errors import SandboxInProduction

SANDBOX_HEADER = "X-Flow-Sandbox"


def sandbox_refusal(
    response: requests.Response, setting: str, request_id: str | None = None
) -> SandboxInProduction | None:
    """A SandboxInProduction naming `setting` when `response` came from the sandbox, else None."""
    if SANDBOX_HEADER not in response.headers:
        return None
    return SandboxInProduction(
        f"{setting} points at the Flow Portal sandbox (its answers carry {SANDBOX_HEADER}); "
        "a production portal does not talk to it: point it at the real Flow Service",
        status=response.status_code,
        code="sandbox_in_production",
        request_id=request_id,
    )
