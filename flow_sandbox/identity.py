"""The sandbox's identity provider: client authentication, access tokens, bearer verification."""

import math
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import RSAKey
from joserfc.jws import extract_compact

from .settings import ALL_SCOPES, DEMO_ORGANIZATION, Client, SandboxSettings, SandboxSettingsError

MIN_CLIENT_KEY_BITS = 4096
CLOCK_SKEW = 60


class TokenRequestError(Exception):
    """An OAuth error answer of the token endpoint (DESIGN §3, Keycloak's shape)."""

    def __init__(self, status: int, error: str, description: str):
        super().__init__(description)
        self.status, self.error, self.description = status, error, description


class InvalidBearer(Exception):
    """The bearer token cannot be accepted; the message says why, without echoing the token."""


@dataclass(frozen=True)
class Principal:
    organization: str
    scopes: frozenset[str]
    subject: str
    kind: str  # "client_credentials" or "self_signed_jwt"


class IdentityProvider:
    def __init__(self, settings: SandboxSettings, clock: Callable[[], float] = time.time):
        self.settings = settings
        self.clock = clock  # the wall clock tokens are issued and checked by; tests move a clock of their own
        self.signing_key = RSAKey.generate_key(2048, parameters={"kid": f"sandbox-{uuid.uuid4().hex[:12]}"})
        self._clients = {client.client_id: client for client in settings.clients}
        self._trusted = _trusted_keys(settings.trusted_keys)
        self._lock = threading.Lock()
        self._seen_jti: dict[str, float] = {}
        self._revoked_before = 0.0
        self._forced_lifetime: int | None = None
        self.token_requests = 0

    # -- issuing ---------------------------------------------------------------------------

    def authenticate_client(self, client_id: str | None, client_secret: str | None) -> Client:
        client = self._clients.get(client_id or "")
        if client is None:
            raise TokenRequestError(401, "invalid_client", "Invalid client or Invalid client credentials")
        if not secrets.compare_digest((client_secret or "").encode(), client.client_secret.encode()):
            raise TokenRequestError(401, "unauthorized_client", "Invalid client or Invalid client credentials")
        return client

    def issue_token(self, client: Client, requested_scope: str | None, issuer: str) -> dict:
        scopes = (requested_scope or "").split()
        if not scopes:
            raise TokenRequestError(400, "invalid_scope", "Scopes are mandatory: give scope")
        not_allowed = [scope for scope in scopes if scope not in client.scopes]
        if not_allowed:
            raise TokenRequestError(400, "invalid_scope", f"Invalid scopes: {' '.join(scopes)}")
        now = self.clock()
        with self._lock:
            self.token_requests += 1
            real_lifetime = self._forced_lifetime or self.settings.token_lifetime
        claims = {
            "iss": issuer,
            "sub": f"service-account-{client.client_id}",
            "azp": client.client_id,
            "org": client.organization,
            "scope": " ".join(scopes),
            "typ": "Bearer",
            "jti": str(uuid.uuid4()),
            "iat": int(now),
            "exp": math.ceil(now) + real_lifetime,
            "auth_time": now,
        }
        header = {"alg": "RS256", "typ": "JWT", "kid": self.signing_key.kid}
        return {
            "access_token": jwt.encode(header, claims, self.signing_key),
            "expires_in": self.settings.token_lifetime,
            "refresh_expires_in": 0,
            "token_type": "Bearer",
            "not-before-policy": 0,
            "scope": " ".join(scopes),
        }

    def public_jwks(self) -> dict:
        return {"keys": [self.signing_key.as_dict(private=False) | {"use": "sig", "alg": "RS256"}]}

    def _now(self) -> int:
        return int(self.clock())

    # -- faults ----------------------------------------------------------------------------

    def expire_tokens(self, lifetime: int | None) -> None:
        """Revoke every token issued so far; with `lifetime`, new tokens die that early too."""
        with self._lock:
            self._revoked_before = self.clock()
            self._forced_lifetime = lifetime

    def restore_tokens(self) -> None:
        with self._lock:
            self._forced_lifetime = None

    # -- verifying -------------------------------------------------------------------------

    def verify_bearer(self, token: str) -> Principal:
        try:
            header = extract_compact(token.encode()).headers()
        except (JoseError, ValueError, UnicodeError):
            raise InvalidBearer("the token is not a JWT") from None
        if header.get("alg") != "RS256":
            raise InvalidBearer("the token must be signed with RS256")
        if header.get("kid") == self.signing_key.kid:
            return self._verify_issued(token)
        return self._verify_self_signed(token, header.get("kid"))

    def _verify_issued(self, token: str) -> Principal:
        claims = self._decode(
            token, self.signing_key, jwt.JWTClaimsRegistry(self._now, exp={"essential": True}, org={"essential": True})
        )
        with self._lock:
            revoked = claims.get("auth_time", 0) <= self._revoked_before
        if revoked:
            raise InvalidBearer("the token has expired")
        return Principal(
            organization=claims["org"],
            scopes=frozenset(str(claims.get("scope", "")).split()),
            subject=str(claims.get("azp")),
            kind="client_credentials",
        )

    def _verify_self_signed(self, token: str, kid: str | None) -> Principal:
        if not kid:
            raise InvalidBearer("the token has no kid header")
        if kid not in self._trusted:
            raise InvalidBearer("no trusted key has this kid")
        key, registered = self._trusted[kid]
        if key.public_key.key_size < MIN_CLIENT_KEY_BITS:
            raise InvalidBearer(f"the key must be RSA of at least {MIN_CLIENT_KEY_BITS} bits")
        registry = jwt.JWTClaimsRegistry(
            self._now,
            leeway=CLOCK_SKEW,
            iss={"essential": True},
            aud={"essential": True, "value": self.settings.audience},
            jti={"essential": True},
            iat={"essential": True},
            nbf={"essential": True},
            exp={"essential": True},
        )
        claims = self._decode(token, key, registry)
        self._remember_jti(str(claims["jti"]), float(claims["exp"]))
        return Principal(
            organization=registered.get("org", DEMO_ORGANIZATION),
            scopes=frozenset(registered.get("scopes", ALL_SCOPES)),
            subject=str(claims["iss"]),
            kind="self_signed_jwt",
        )

    @staticmethod
    def _decode(token: str, key, registry: jwt.JWTClaimsRegistry) -> dict:
        try:
            claims = jwt.decode(token, key, algorithms=["RS256"]).claims
            registry.validate(claims)
        except JoseError as error:
            raise InvalidBearer(_describe(error)) from None
        except (ValueError, TypeError):
            raise InvalidBearer("the token cannot be decoded") from None
        return claims

    def _remember_jti(self, jti: str, expires: float) -> None:
        now = self.clock()
        with self._lock:
            if jti in self._seen_jti:
                raise InvalidBearer("this jti was used before; make a new JWT for every request")
            if len(self._seen_jti) > 10_000:
                self._seen_jti = {seen: until for seen, until in self._seen_jti.items() if until + CLOCK_SKEW > now}
            self._seen_jti[jti] = expires


def _trusted_keys(jwks: dict | None) -> dict[str, tuple[RSAKey, dict]]:
    """Public RSA keys by kid, each with its JWKS entry (which may name `org` and `scopes`)."""
    trusted = {}
    for entry in (jwks or {}).get("keys", []):
        try:
            trusted[entry["kid"]] = (RSAKey.import_key(entry), entry)
        except (JoseError, ValueError, KeyError, TypeError):
            raise SandboxSettingsError("SANDBOX_TRUSTED_KEYS: every key must be an RSA JWK with a kid") from None
    return trusted


def _describe(error: JoseError) -> str:
    text = getattr(error, "description", None) or error.error
    return f"the token is not valid: {text}"
