"""Bearer tokens for the Flow Service: client credentials (seed §5.1) or a self-signed JWT (§5.3)."""

import logging
import threading
import time
import uuid
from pathlib import Path
from typing import Protocol

import requests
from authlib.integrations.requests_client import OAuth2Session, OAuthError
from joserfc import jwt
from joserfc.jwk import RSAKey

from .errors import (
    FlowApiError,
    InsufficientScope,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
)

log = logging.getLogger(__name__)

MIN_KEY_BITS = 4096
BAD_CREDENTIALS = ("invalid_client", "unauthorized_client")  # PROTOCOLS.md: treat alike


class TokenProvider(Protocol):
    def token(self) -> str: ...

    def invalidate(self, token: str) -> None: ...

    def describe(self) -> dict: ...


class ClientCredentialsProvider:
    """One cached access token per process, shared by all threads, fetched one at a time."""

    def __init__(
        self,
        *,
        token_url: str,
        client_id: str,
        client_secret: str,
        scopes: tuple[str, ...],
        auth_method: str,
        leeway: int,
        timeout: tuple[float, float],
    ):
        self._token_url = token_url
        self._leeway = leeway
        self._session = OAuth2Session(
            client_id=client_id,
            client_secret=client_secret,
            token_endpoint_auth_method=auth_method,
            scope=" ".join(scopes),
            default_timeout=timeout,
        )
        # authlib's sync client has no lock: 16 threads on a cold cache would each fetch a token.
        self._lock = threading.Lock()
        self._current: dict | None = None

    def token(self) -> str:
        current = self._current
        if self._is_fresh(current):
            return current["access_token"]
        with self._lock:
            if not self._is_fresh(self._current):
                self._current = self._fetch()
            return self._current["access_token"]

    def invalidate(self, token: str) -> None:
        """Drop the cached token if it is the one the API refused (not a newer one)."""
        with self._lock:
            if self._current and self._current["access_token"] == token:
                self._current = None

    def describe(self) -> dict:
        self.token()
        current = self._current or {}
        return {"lifetime": current.get("expires_in"), "scopes": current.get("scope", "")}

    def _is_fresh(self, current: dict | None) -> bool:
        if not current:
            return False
        expires_at = current.get("expires_at")
        # A token without expires_in never counts as expired; a 401 still renews it.
        return expires_at is None or expires_at - self._leeway > time.time()

    def _fetch(self) -> dict:
        started = time.monotonic()
        try:
            answer = self._session.fetch_token(self._token_url, grant_type="client_credentials")
        except OAuthError as error:
            raise _token_error(error) from None
        except requests.exceptions.SSLError:
            raise UpstreamUnavailable(
                "The identity provider's TLS certificate cannot be verified", code="tls"
            ) from None
        except requests.Timeout:
            raise UpstreamTimeout("The identity provider did not answer in time", code="token_timeout") from None
        except requests.ConnectionError:
            raise UpstreamUnavailable("Cannot connect to the identity provider", code="token_unreachable") from None
        except requests.HTTPError as error:
            status = error.response.status_code if error.response is not None else None
            raise _token_http_error(status) from None
        except ValueError:
            raise UpstreamProtocolError(
                "The identity provider's answer is not a JSON object", code="token_malformed"
            ) from None
        if not isinstance(answer.get("access_token"), str):
            raise UpstreamProtocolError("The identity provider's answer has no access_token", code="token_malformed")
        log.info(
            "flowapi: fetched an access token (expires_in=%s, took %.0f ms)",
            answer.get("expires_in"),
            (time.monotonic() - started) * 1000,
        )
        return dict(answer)


def _token_error(error: OAuthError) -> FlowApiError:
    code = error.error or "token_error"
    if code in BAD_CREDENTIALS:
        return Unauthorized("The identity provider refused the client id or secret", code=code)
    if code == "invalid_scope":
        return InsufficientScope("The identity provider refused the requested scopes (FLOW_SCOPES)", code=code)
    return Unauthorized(f"The identity provider refused the token request ({code})", code=code)


def _token_http_error(status: int | None) -> FlowApiError:
    if status == 429 or (status and status >= 500):
        return UpstreamUnavailable("The identity provider is unavailable", status=status, code="token_unavailable")
    return UpstreamProtocolError(
        "The identity provider answered without a readable body", status=status, code="token_malformed"
    )


class SelfSignedJwtProvider:
    """A fresh RS256 JWT for every request (seed §5.3); nothing is cached or fetched."""

    def __init__(self, *, private_key: Path, kid: str, issuer: str, audience: str, lifetime: int):
        self._key = load_private_key(private_key)
        self._kid, self._issuer, self._audience, self._lifetime = kid, issuer, audience, lifetime

    def token(self) -> str:
        now = int(time.time())
        claims = {
            "iss": self._issuer,
            "aud": self._audience,
            "jti": str(uuid.uuid4()),
            "iat": now,
            "nbf": now,
            "exp": now + self._lifetime,
        }
        return jwt.encode({"alg": "RS256", "typ": "JWT", "kid": self._kid}, claims, self._key)

    def invalidate(self, token: str) -> None:
        """Nothing to drop: the next request signs a new JWT anyway."""

    def describe(self) -> dict:
        return {"lifetime": self._lifetime, "scopes": "(registered with the key by the operator)"}


class PrivateKeyError(ValueError):
    """The private key cannot be used: unreadable, not RSA, or too short."""


def load_private_key(path: Path) -> RSAKey:
    try:
        key = RSAKey.import_key(Path(path).read_bytes())
    except OSError as error:
        raise PrivateKeyError(f"cannot read the private key {path}: {error.strerror}") from None
    except Exception:  # joserfc raises several types for a file that is not an RSA PEM
        raise PrivateKeyError(f"{path} is not an RSA private key in PEM form") from None
    if not key.is_private:
        raise PrivateKeyError(f"{path} holds a public key; the private key is needed")
    if key.public_key.key_size < MIN_KEY_BITS:
        bits = key.public_key.key_size
        raise PrivateKeyError(f"{path} is a {bits}-bit key; at least {MIN_KEY_BITS} bits are required")
    return key
