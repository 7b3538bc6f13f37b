"""The sandbox identity provider over real HTTP: tokens, discovery, JWKS, every error."""

import json

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import KeySet

SCOPE = "loan-application:create:no"


def token_request(sandbox, path=None, auth=None, **form):
    data = {
        "grant_type": "client_credentials",
        "client_id": "demo-client",
        "client_secret": "demo-secret",
        "scope": SCOPE,
    } | form
    data = {key: value for key, value in data.items() if value is not None}
    return requests.post(
        sandbox.url + (path or "/realms/sandbox/protocol/openid-connect/token"), data=data, auth=auth, timeout=5
    )


def test_token_answer_has_keycloak_shape_and_verifies_with_jwks(sandbox):
    answer = token_request(sandbox)
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    body = answer.json()
    assert body["token_type"] == "Bearer"
    assert body["expires_in"] == 300
    assert body["refresh_expires_in"] == 0
    assert body["not-before-policy"] == 0
    assert body["scope"] == SCOPE
    jwks = requests.get(f"{sandbox.url}/realms/sandbox/protocol/openid-connect/certs", timeout=5).json()
    token = jwt.decode(body["access_token"], KeySet.import_key_set(jwks), algorithms=["RS256"])
    assert token.header["kid"] == jwks["keys"][0]["kid"]
    claims = token.claims
    assert claims["org"] == "demo-org"
    assert claims["azp"] == "demo-client"
    assert claims["scope"] == SCOPE
    assert claims["iss"] == f"{sandbox.url}/realms/sandbox"
    assert 300 <= claims["exp"] - claims["iat"] <= 301


def test_basic_authentication_and_oauth2_alias(sandbox):
    answer = token_request(
        sandbox, "/oauth2/token", auth=("demo-client", "demo-secret"), client_id=None, client_secret=None
    )
    assert answer.status_code == 200
    assert sandbox.api("GET", "/api/flows", answer.json()["access_token"]).status_code == 200


def test_token_lifetime_is_configurable(make_sandbox):
    sandbox = make_sandbox(SANDBOX_TOKEN_LIFETIME="42")
    assert token_request(sandbox).json()["expires_in"] == 42


def test_discovery_documents(sandbox):
    for path in ("/.well-known/openid-configuration", "/realms/sandbox/.well-known/openid-configuration"):
        document = requests.get(sandbox.url + path, timeout=5).json()
        assert document["issuer"] == f"{sandbox.url}/realms/sandbox"
        assert document["token_endpoint"] == f"{sandbox.url}/realms/sandbox/protocol/openid-connect/token"
        assert document["jwks_uri"].endswith("/realms/sandbox/protocol/openid-connect/certs")
        assert "client_credentials" in document["grant_types_supported"]


@pytest.mark.parametrize(
    ("form", "auth", "status", "error"),
    [
        ({"client_id": "nobody"}, None, 401, "invalid_client"),
        ({"client_id": None, "client_secret": None}, None, 401, "invalid_client"),
        ({"client_secret": "wrong"}, None, 401, "unauthorized_client"),
        ({"grant_type": "password"}, None, 400, "unsupported_grant_type"),
        ({"grant_type": None}, None, 400, "invalid_request"),
        ({"scope": "loan-application:create:dk"}, None, 400, "invalid_scope"),
        ({"scope": None}, None, 400, "invalid_scope"),
        ({"client_id": None}, ("demo-client", "demo-secret"), 400, "invalid_request"),
        ({"client_id": None, "client_secret": None}, ("demo-client", "wrong"), 401, "unauthorized_client"),
    ],
)
def test_token_errors(sandbox, form, auth, status, error):
    answer = token_request(sandbox, auth=auth, **form)
    assert answer.status_code == status
    assert answer.json()["error"] == error
    assert answer.json()["error_description"]


def test_scope_outside_a_clients_allowance_is_invalid_scope(make_sandbox, tmp_path):
    clients = tmp_path / "clients.json"
    clients.write_text(
        json.dumps(
            [{"client_id": "narrow", "client_secret": "narrow-secret", "organization": "other-org", "scopes": [SCOPE]}]
        )
    )
    sandbox = make_sandbox(SANDBOX_CLIENTS=str(clients))
    ok = token_request(sandbox, client_id="narrow", client_secret="narrow-secret")
    assert ok.status_code == 200
    refused = token_request(
        sandbox, client_id="narrow", client_secret="narrow-secret", scope=f"{SCOPE} loan-application:create:se"
    )
    assert refused.status_code == 400
    assert refused.json() == {
        "error": "invalid_scope",
        "error_description": f"Invalid scopes: {SCOPE} loan-application:create:se",
    }


def test_token_request_must_be_form_encoded(sandbox):
    answer = requests.post(sandbox.token_url, json={"grant_type": "client_credentials"}, timeout=5)
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request"


def test_unknown_realm_is_404(sandbox):
    answer = requests.post(
        f"{sandbox.url}/realms/other/protocol/openid-connect/token",
        data={"grant_type": "client_credentials"},
        timeout=5,
    )
    assert answer.status_code == 404
    assert requests.get(f"{sandbox.url}/realms/other/protocol/openid-connect/certs", timeout=5).status_code == 404


def test_token_endpoint_takes_only_post(sandbox):
    assert requests.get(sandbox.token_url, timeout=5).status_code == 405


def test_extra_clients_may_use_the_short_field_names(make_sandbox, tmp_path):
    clients = tmp_path / "clients.json"
    clients.write_text(
        json.dumps(
            [
                {
                    "id": "short",
                    "secret": "short-secret",
                    "organization": "short-org",
                    "allowed_scopes": ["loan-application:create:se"],
                }
            ]
        )
    )
    sandbox = make_sandbox(SANDBOX_CLIENTS=str(clients))
    refused = token_request(sandbox, client_id="short", client_secret="short-secret")
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_scope"
    granted = token_request(
        sandbox, client_id="short", client_secret="short-secret", scope="loan-application:create:se"
    )
    assert (
        jwt.decode(
            granted.json()["access_token"],
            KeySet.import_key_set(
                requests.get(f"{sandbox.url}/realms/sandbox/protocol/openid-connect/certs", timeout=5).json()
            ),
        ).claims["org"]
        == "short-org"
    )


def test_bad_sandbox_settings_stop_start_up(tmp_path):
    from flow_sandbox import create_app

    broken = tmp_path / "clients.json"
    broken.write_text('[{"organization": "no-id"}]')
    for settings in (
        {"SANDBOX_CLIENTS": str(broken)},
        {"SANDBOX_TOKEN_LIFETIME": "soon"},
        {"SANDBOX_WEBHOOK_SECRET": "plain"},
        {"SANDBOX_TRUSTED_KEYS": str(tmp_path / "missing.json")},
    ):
        with pytest.raises(SystemExit):
            create_app(settings)
