"""Optional staff single sign-on (OpenID Connect, authorization code) against a small real IdP."""

import time
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import requests
from flask import Flask, jsonify, redirect, request
from joserfc import jwt
from joserfc.jwk import RSAKey

from portal.extensions import db
from portal.models import User


class StaffIdentityProvider:
    """An OIDC provider that signs in whoever `subject` names; the portal talks to it over HTTP."""

    def __init__(self, serve):
        self.key = RSAKey.generate_key(2048, parameters={"kid": "staff-idp"})
        self.subject = "staff-42"
        self.codes: dict[str, str] = {}
        app = Flask("staff-idp")
        app.add_url_rule("/.well-known/openid-configuration", view_func=self.discovery)
        app.add_url_rule("/authorize", view_func=self.authorize)
        app.add_url_rule("/token", view_func=self.token, methods=["POST"])
        app.add_url_rule("/jwks", view_func=lambda: jsonify({"keys": [self.key.as_dict(private=False)]}))
        self.url = serve(app)

    def discovery(self):
        return jsonify(
            {
                "issuer": self.url,
                "authorization_endpoint": f"{self.url}/authorize",
                "token_endpoint": f"{self.url}/token",
                "jwks_uri": f"{self.url}/jwks",
                "response_types_supported": ["code"],
                "id_token_signing_alg_values_supported": ["RS256"],
            }
        )

    def authorize(self):
        code = f"code-{len(self.codes)}"
        self.codes[code] = request.args["nonce"]
        return redirect(f"{request.args['redirect_uri']}?{urlencode({'code': code, 'state': request.args['state']})}")

    def token(self):
        nonce = self.codes.pop(request.form["code"])
        now = int(time.time())
        claims = {
            "iss": self.url,
            **({"sub": self.subject} if self.subject is not None else {}),
            "aud": "portal-staff",
            "nonce": nonce,
            "iat": now,
            "exp": now + 300,
        }
        id_token = jwt.encode({"alg": "RS256", "kid": "staff-idp"}, claims, self.key)
        return jsonify({"access_token": "opaque", "token_type": "Bearer", "expires_in": 300, "id_token": id_token})


@pytest.fixture
def staff_idp(serve):
    return StaffIdentityProvider(serve)


@pytest.fixture
def sso_app(make_app, staff_idp):
    app = make_app(
        WTF_CSRF_ENABLED=False,
        PORTAL_OIDC_ISSUER=staff_idp.url,
        PORTAL_OIDC_CLIENT_ID="portal-staff",
        PORTAL_OIDC_CLIENT_SECRET="staff-secret",
    )
    with app.app_context():
        db.session.add(User(username="ingrid", role="operator", sso_subject="staff-42"))
        db.session.commit()
    return app


def through_the_idp(client) -> str:
    """Start single sign-on and let the IdP answer; return the portal callback path it sends back to."""
    start = client.get("/login/sso")
    assert start.status_code == 302
    authorize = start.headers["Location"]
    query = parse_qs(urlsplit(authorize).query)
    assert query["client_id"] == ["portal-staff"] and query["response_type"] == ["code"]
    back = requests.get(authorize, allow_redirects=False, timeout=5).headers["Location"]
    parts = urlsplit(back)
    return f"{parts.path}?{parts.query}"


def test_single_sign_on_signs_in_the_linked_account(sso_app):
    client = sso_app.test_client()
    assert "Sign in with single sign-on" in client.get("/login").text
    answer = client.get(through_the_idp(client))
    assert answer.status_code == 302 and answer.headers["Location"] == "/flows"
    assert "ingrid" in client.get("/flows").text


def test_an_unlinked_identity_is_refused(sso_app, staff_idp):
    staff_idp.subject = "stranger"
    client = sso_app.test_client()
    answer = client.get(through_the_idp(client), follow_redirects=True)
    assert "has no portal account" in answer.text
    assert client.get("/flows").status_code == 302


def test_a_forged_callback_is_refused(sso_app):
    client = sso_app.test_client()
    answer = client.get("/login/sso/callback?code=code-0&state=forged", follow_redirects=True)
    assert "Single sign-on failed" in answer.text


def test_sso_is_off_by_default(client):
    assert "single sign-on" not in client.get("/login").text
    assert client.get("/login/sso").status_code == 404


def test_an_identity_without_a_subject_is_refused(sso_app, staff_idp):
    staff_idp.subject = None
    with sso_app.app_context():
        db.session.add(User(username="none-user", role="admin", sso_subject="None"))
        db.session.commit()
    client = sso_app.test_client()
    answer = client.get(through_the_idp(client), follow_redirects=True)
    assert "Single sign-on failed" in answer.text or "has no portal account" in answer.text
    assert client.get("/flows").status_code == 302, "nobody is signed in, least of all the account named None"
