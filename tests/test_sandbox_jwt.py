"""Self-signed JWTs (seed §5.3) at the sandbox: accepted when right, refused for every DESIGN §3 reason."""

import json
import time
import uuid

import pytest
from joserfc import jwt
from joserfc.jwk import OctKey, RSAKey

from portal.flowapi.tokens import SelfSignedJwtProvider


@pytest.fixture
def jwt_sandbox(make_sandbox, trusted_keys_file):
    return make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted_keys_file))


def claims(**changes):
    now = int(time.time())
    base = {"iss": "lender", "aud": "flow-sandbox", "jti": str(uuid.uuid4()), "iat": now, "nbf": now, "exp": now + 60}
    return {key: value for key, value in (base | changes).items() if value is not None}


def sign(client_key, body, kid=None, key=None):
    key = key or RSAKey.import_key(client_key.private_pem.read_bytes())
    return jwt.encode({"alg": "RS256", "typ": "JWT", "kid": kid or client_key.kid}, body, key)


def test_provider_jwt_is_accepted_and_sees_its_flows(jwt_sandbox, client_key):
    provider = SelfSignedJwtProvider(
        private_key=client_key.private_pem, kid=client_key.kid, issuer="lender", audience="flow-sandbox", lifetime=60
    )
    token = provider.token()
    header = jwt.decode(token, RSAKey.import_key(client_key.jwks["keys"][0])).header
    assert header == {"alg": "RS256", "typ": "JWT", "kid": client_key.kid}
    created = jwt_sandbox.create(token=provider.token())
    listed = jwt_sandbox.api("GET", "/api/flows", provider.token()).json()["data"]
    assert [item["id"] for item in listed] == [created["flowId"]]
    assert listed[0]["organizationId"] == "demo-org"


def test_a_jwt_is_accepted_once(jwt_sandbox, client_key):
    token = sign(client_key, claims())
    assert jwt_sandbox.api("GET", "/api/flows", token).status_code == 200
    again = jwt_sandbox.api("GET", "/api/flows", token)
    assert again.status_code == 401
    assert "jti" in again.json()["message"]


# Changes to good claims; a number is seconds from the moment the test runs (not when it is collected).
BAD_CLAIMS = {
    "wrong-aud": {"aud": "someone-else"},
    "no-aud": {"aud": None},
    "no-iss": {"iss": None},
    "no-jti": {"jti": None},
    "expired": {"exp": -120},
    "no-exp": {"exp": None},
    "not-yet-valid": {"nbf": 120},
    "no-nbf": {"nbf": None},
    "issued-in-future": {"iat": 120},
    "no-iat": {"iat": None},
}


@pytest.mark.parametrize("changes", BAD_CLAIMS.values(), ids=BAD_CLAIMS.keys())
def test_bad_claims_are_refused(jwt_sandbox, client_key, changes):
    now = int(time.time())
    body = claims(**{name: now + value if isinstance(value, int) else value for name, value in changes.items()})
    answer = jwt_sandbox.api("GET", "/api/flows", sign(client_key, body))
    assert answer.status_code == 401
    assert answer.json()["error"] == "unauthorized"


def test_sixty_seconds_of_skew_is_tolerated(jwt_sandbox, client_key):
    now = int(time.time())
    token = sign(client_key, claims(iat=now + 30, nbf=now + 30, exp=now + 90))
    assert jwt_sandbox.api("GET", "/api/flows", token).status_code == 200


def test_unknown_kid_and_foreign_signature_are_refused(jwt_sandbox, client_key):
    assert jwt_sandbox.api("GET", "/api/flows", sign(client_key, claims(), kid="unknown")).status_code == 401
    impostor = RSAKey.generate_key(2048)
    forged = sign(client_key, claims(), key=impostor)
    assert jwt_sandbox.api("GET", "/api/flows", forged).status_code == 401


def test_hs256_is_refused(jwt_sandbox, client_key):
    secret = OctKey.import_key(b"x" * 32)
    token = jwt.encode({"alg": "HS256", "kid": client_key.kid}, claims(), secret)
    assert jwt_sandbox.api("GET", "/api/flows", token).status_code == 401


def test_keys_under_4096_bits_are_refused(make_sandbox, tmp_path):
    small = RSAKey.generate_key(2048, parameters={"kid": "small"})
    trusted = tmp_path / "small.json"
    trusted.write_text(json.dumps({"keys": [small.as_dict(private=False)]}))
    sandbox = make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted))
    token = jwt.encode({"alg": "RS256", "typ": "JWT", "kid": "small"}, claims(), small)
    answer = sandbox.api("GET", "/api/flows", token)
    assert answer.status_code == 401
    assert "4096" in answer.json()["message"]


def test_a_key_may_name_its_organization(make_sandbox, client_key, tmp_path):
    trusted = tmp_path / "org.json"
    trusted.write_text(json.dumps({"keys": [client_key.jwks["keys"][0] | {"org": "acme-bank"}]}))
    sandbox = make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted))
    sandbox.create()  # demo-org, through the secret
    listed = sandbox.api("GET", "/api/flows", sign(client_key, claims())).json()["data"]
    assert listed == []
    sandbox.create(token=sign(client_key, claims()))
    listed = sandbox.api("GET", "/api/flows", sign(client_key, claims())).json()["data"]
    assert [item["organizationId"] for item in listed] == ["acme-bank"]
