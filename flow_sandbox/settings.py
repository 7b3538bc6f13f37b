"""The sandbox's settings (DESIGN §3), read from the environment or a mapping given to `create_app`."""

import base64
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from urllib3.exceptions import LocationParseError
from urllib3.util import parse_url

ALL_SCOPES = tuple(
    f"loan-application:{verb}:{country}"
    for country in ("no", "se", "fi")
    for verb in ("create", "update", "delete", "accept")
)
# A fixed, published demo secret: the sandbox is never a production peer.
DEMO_WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"flow-sandbox-demo-webhook-secret").decode()
DEMO_ORGANIZATION = "demo-org"
MIN_CONTROL_TOKEN = 16
DEFAULT_PORTS = {"http": 80, "https": 443}


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
    allow_remote: bool = False
    control_token: str | None = field(default=None, repr=False)
    webhook_allow: frozenset[str] = frozenset()

    @property
    def uses_demo_webhook_secret(self) -> bool:
        return self.webhook_secret == DEMO_WEBHOOK_SECRET

    def allows_webhook_to(self, url: str) -> bool:
        """Any target on a loopback-only sandbox without an allow-list; else only the listed origins."""
        if not (self.allow_remote or self.webhook_allow):
            return True
        return origin_of(url) in self.webhook_allow


def origin_of(url: str) -> str | None:
    """`scheme://host:port` as the webhook sender's HTTP library reads the URL, None when unreadable.

    urllib3's parser, not urlsplit: the two disagree on URLs like `http://a\\@b/`, and the allow-list
    must judge the host that requests will actually connect to.
    """
    try:
        parts = parse_url(url)
    except LocationParseError:
        return None
    scheme = (parts.scheme or "").lower()
    if scheme not in DEFAULT_PORTS or not parts.host:
        return None
    return f"{scheme}://{parts.host.lower()}:{parts.port or DEFAULT_PORTS[scheme]}"


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


def _flag(env: Mapping, name: str) -> bool:
    raw = (env.get(name) or "0").strip().lower()
    if raw not in ("0", "1", "true", "false", "yes", "no"):
        raise SandboxSettingsError(f"{name} must be 1 or 0, got {raw!r}")
    return raw in ("1", "true", "yes")


def _control_token(env: Mapping) -> str | None:
    token = env.get("SANDBOX_CONTROL_TOKEN") or None
    if token is not None and (len(token) < MIN_CONTROL_TOKEN or not token.isascii() or not token.isprintable()):
        raise SandboxSettingsError(
            f"SANDBOX_CONTROL_TOKEN must be at least {MIN_CONTROL_TOKEN} printable ASCII characters"
        )
    return token


def _webhook_allow(env: Mapping) -> frozenset[str]:
    origins = set()
    for entry in (env.get("SANDBOX_WEBHOOK_ALLOW") or "").replace(",", " ").split():
        origin = origin_of(entry)
        if origin is None or parse_url(entry).path not in (None, "", "/"):
            raise SandboxSettingsError(
                f"SANDBOX_WEBHOOK_ALLOW must list origins like https://portal.example:8443, got {entry!r}"
            )
        origins.add(origin)
    return frozenset(origins)


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
        allow_remote=_flag(env, "SANDBOX_ALLOW_REMOTE"),
        control_token=_control_token(env),
        webhook_allow=_webhook_allow(env),
    )
