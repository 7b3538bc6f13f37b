"""Identity provider endpoints: token (Keycloak paths and /oauth2/token), discovery, JWKS."""

from urllib.parse import unquote

from flask import Blueprint, jsonify, request, url_for

from .faults_views import apply_faults
from .identity import TokenRequestError
from .runtime import runtime
from .settings import ALL_SCOPES

bp = Blueprint("idp", __name__)

FORM_TYPE = "application/x-www-form-urlencoded"


def _oauth_error(status: int, error: str, description: str):
    response = jsonify({"error": error, "error_description": description})
    response.status_code = status
    response.headers["Cache-Control"] = "no-store"
    return response


def _check_realm(realm: str):
    if realm != runtime().settings.realm:
        return _oauth_error(404, "not_found", "Realm does not exist")
    return None


def _issuer() -> str:
    return request.url_root.rstrip("/") + f"/realms/{runtime().settings.realm}"


def _client_credentials() -> tuple[str | None, str | None]:
    """Client id and secret from HTTP Basic (RFC 6749 §2.3.1, form-encoded) or the body."""
    basic = request.authorization
    in_body = "client_secret" in request.form
    if basic and basic.type == "basic":
        if in_body:
            raise TokenRequestError(400, "invalid_request", "Use one client authentication method, not two")
        return unquote(basic.username or ""), unquote(basic.password or "")
    return request.form.get("client_id"), request.form.get("client_secret")


def _token_answer():
    if request.mimetype != FORM_TYPE:
        raise TokenRequestError(400, "invalid_request", f"Content-Type must be {FORM_TYPE}")
    grant_type = request.form.get("grant_type")
    if not grant_type:
        raise TokenRequestError(400, "invalid_request", "Missing form parameter: grant_type")
    if grant_type != "client_credentials":
        raise TokenRequestError(400, "unsupported_grant_type", "Unsupported grant_type")
    client = runtime().identity.authenticate_client(*_client_credentials())
    return runtime().identity.issue_token(client, request.form.get("scope"), _issuer())


def _token():
    faulted = apply_faults("token")
    if faulted is not None:
        return faulted
    try:
        answer = _token_answer()
    except TokenRequestError as error:
        return _oauth_error(error.status, error.error, error.description)
    response = jsonify(answer)
    response.headers["Cache-Control"] = "no-store"
    return response


@bp.post("/realms/<realm>/protocol/openid-connect/token")
def realm_token(realm: str):
    """Client-credentials token endpoint at Keycloak's path."""
    return _check_realm(realm) or _token()


@bp.post("/oauth2/token")
def oauth2_token():
    """The same token endpoint at the alias path the spec names."""
    return _token()


@bp.get("/realms/<realm>/protocol/openid-connect/certs")
def jwks(realm: str):
    return _check_realm(realm) or jsonify(runtime().identity.public_jwks())


def _discovery():
    realm = runtime().settings.realm
    return jsonify(
        {
            "issuer": _issuer(),
            "token_endpoint": url_for("idp.realm_token", realm=realm, _external=True),
            "jwks_uri": url_for("idp.jwks", realm=realm, _external=True),
            "grant_types_supported": ["client_credentials"],
            "token_endpoint_auth_methods_supported": ["client_secret_post", "client_secret_basic"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "scopes_supported": list(ALL_SCOPES),
            "flow_sandbox": True,  # not a real identity provider: tools and portals can tell
        }
    )


@bp.get("/realms/<realm>/.well-known/openid-configuration")
def realm_discovery(realm: str):
    return _check_realm(realm) or _discovery()


@bp.get("/.well-known/openid-configuration")
def discovery():
    return _discovery()
