"""The sandbox's settings (DESIGN §3), read from the environment or a mapping given to `create_app`."""

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

ALL_SCOPES = tuple(
    f"loan-application:{verb}:{country}"
    for country in ("no", "se", "fi")
    for verb in ("create", "update", "delete", "accept")
)
# A fixed, published demo secret: the sandbox is never a production peer.
DEMO_WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"flow-sandbox-demo-webhook-secret").decode()
DEMO_ORGANIZATION = "demo-org"


class SandboxSettingsError(ValueError):
    """A sandbox setting is missing or malformed; the message names it."""


@dataclass(frozen=True)
class Client:
    client_id: str
    client_secret: str
    organization: str
    scopes: frozenset[str]


@dataclass(frozen=True)
class SandboxSettings:
    realm: str = "sandbox"
    audience: str = "flow-sandbox"
    token_lifetime: int = 300
    webhook_secret: str = DEMO_WEBHOOK_SECRET
    webhook_backoff: float = 1.0
    webhook_attempts: int = 5
    webhook_timeout: float = 5.0
    seed: int = 0
    trusted_keys: dict | None = None
    clients: tuple[Client, ...] = field(default_factory=tuple)

    @property
    def uses_demo_webhook_secret(self) -> bool:
        return self.webhook_secret == DEMO_WEBHOOK_SECRET


def _number(env: Mapping, name: str, default, kind=int, minimum=0):
    raw = env.get(name)
    if raw in (None, ""):
        return default
    try:
        value = kind(raw)
    except (TypeError, ValueError):
        raise SandboxSettingsError(f"{name} must be a number, got {raw!r}") from None
    if value < minimum:
        raise SandboxSettingsError(f"{name} must be at least {minimum}")
    return value


def _file_text(env: Mapping, name: str) -> str | None:
    path = env.get(name)
    if not path:
        return None
    try:
        return Path(path).read_text().strip()
    except OSError as error:
        raise SandboxSettingsError(f"{name}: cannot read {path} ({error.strerror})") from None


def _json_file(env: Mapping, name: str):
    path = env.get(name)
    if not path:
        return None
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise SandboxSettingsError(f"{name}: cannot read JSON from {path}: {error}") from None


def _first(entry: dict, *names):
    """The value under the first of `names` present: DESIGN names the fields loosely."""
    for name in names:
        if name in entry:
            return entry[name]
    raise KeyError(names[0])


def _client(entry: dict) -> Client:
    scopes = entry.get("scopes", entry.get("allowed_scopes", ALL_SCOPES))
    return Client(
        str(_first(entry, "client_id", "id")),
        str(_first(entry, "client_secret", "secret")),
        str(entry.get("organization", entry.get("org", DEMO_ORGANIZATION))),
        frozenset(scopes.split() if isinstance(scopes, str) else scopes),
    )


def _clients(env: Mapping) -> tuple[Client, ...]:
    demo = Client("demo-client", "demo-secret", DEMO_ORGANIZATION, frozenset(ALL_SCOPES))
    extra = _json_file(env, "SANDBOX_CLIENTS") or []
    try:
        return (demo,) + tuple(_client(entry) for entry in extra)
    except (KeyError, TypeError, AttributeError):
        raise SandboxSettingsError(
            "SANDBOX_CLIENTS must be a JSON list of {client_id, client_secret, organization, scopes}"
        ) from None


def _webhook_secret(env: Mapping) -> str:
    secret = env.get("SANDBOX_WEBHOOK_SECRET") or _file_text(env, "SANDBOX_WEBHOOK_SECRET_FILE") or DEMO_WEBHOOK_SECRET
    try:
        if not secret.startswith("whsec_") or len(base64.b64decode(secret[6:], validate=True)) < 16:
            raise ValueError
    except ValueError:
        raise SandboxSettingsError(
            "SANDBOX_WEBHOOK_SECRET must be whsec_ followed by base64 of at least 16 bytes"
        ) from None
    return secret


def load_sandbox_settings(env: Mapping | None = None) -> SandboxSettings:
    env = os.environ if env is None else env
    return SandboxSettings(
        realm=env.get("SANDBOX_REALM") or "sandbox",
        audience=env.get("SANDBOX_JWT_AUDIENCE") or "flow-sandbox",
        token_lifetime=_number(env, "SANDBOX_TOKEN_LIFETIME", 300, minimum=1),
        webhook_secret=_webhook_secret(env),
        webhook_backoff=_number(env, "SANDBOX_WEBHOOK_BACKOFF", 1.0, kind=float),
        webhook_attempts=_number(env, "SANDBOX_WEBHOOK_ATTEMPTS", 5, minimum=1),
        webhook_timeout=_number(env, "SANDBOX_WEBHOOK_TIMEOUT", 5.0, kind=float),
        seed=_number(env, "SANDBOX_SEED", 0),
        trusted_keys=_json_file(env, "SANDBOX_TRUSTED_KEYS"),
        clients=_clients(env),
    )
