"""Every setting of DESIGN §2, read and validated in one place.

A missing or malformed setting raises `SettingsError` whose message is one line naming it.
Each secret may be given directly or as `NAME_FILE`, the path of a file that holds it.
"""

import base64
import binascii
import ipaddress
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, overload
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from .production import production_problems
from .rsakeys import PrivateKeyError, load_private_key
from .webhooks.shape import SHAPES, parse_fields

ENVIRONMENTS = ("test", "production")
AUTH_MODES = ("client_credentials", "self_signed_jwt")
WEBHOOK_SCHEMES = ("standard-webhooks", "hmac-sha256")
TOKEN_AUTH_METHODS = ("client_secret_post", "client_secret_basic")
COUNTRIES = {"no": "Norway", "se": "Sweden", "fi": "Finland"}
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
_EMAIL = re.compile(r"[^@\s,<>]+@[^@\s,<>]+\.[^@\s,<>]+")
_SCOPE = re.compile(r"[\x21\x23-\x5b\x5d-\x7e]+")  # RFC 6749 §3.3 scope-token


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names it."""


@dataclass(frozen=True)
class Settings:
    environment: str
    api_url: str
    auth_mode: str
    token_url: str | None
    client_id: str | None
    client_secret: str | None = field(repr=False)
    scopes: tuple[str, ...]
    token_auth_method: str
    token_leeway: int
    jwt_private_key: Path | None
    jwt_kid: str | None
    jwt_issuer: str | None
    jwt_audience: str | None
    jwt_lifetime: int
    connect_timeout: float
    read_timeout: float
    retries: int
    retry_budget: float
    webhook_secrets: tuple[str, ...] = field(repr=False)
    webhook_scheme: str
    webhook_header: str
    webhook_path: str
    webhook_max_bytes: int
    webhook_shape: str
    webhook_fields: tuple[tuple[str, str], ...]
    webhook_id_header: str
    secret_key: str = field(repr=False)
    index_key: bytes = field(repr=False)
    database_url: str
    redis_url: str | None
    public_url: str
    redirect_url: str
    timezone: str
    oidc_issuer: str | None
    oidc_client_id: str | None
    oidc_client_secret: str | None = field(repr=False)
    rejected_keep: int
    log_level: str
    trusted_proxies: int
    db_connect_timeout: float
    db_statement_timeout: float
    metrics_token: str | None = field(repr=False)
    metrics_allow: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]
    session_idle_seconds: int
    session_max_seconds: int
    redis_prefix: str
    trusted_hosts: tuple[str, ...]
    event_retention_days: int
    rejected_retention_days: int  # 0: kept forever (the retention settings below alike)
    audit_retention_days: int
    access_log_retention_days: int
    legal_hold: tuple[str, ...]
    gone_flow_retention_days: int
    reveal_purposes: tuple[str, ...]
    # Secrets of a finished rotation: never accepted, only tried to tell staff a sender still signs with them.
    webhook_retired_secrets: tuple[str, ...] = field(default=(), repr=False)
    stuck_after_hours: int = 48
    gap_grace_seconds: int = 300
    notify_url: str | None = None
    notify_secret: str | None = field(default=None, repr=False)
    smtp_host: str | None = None
    smtp_port: int = 587
    smtp_security: str = "starttls"
    smtp_user: str | None = None
    smtp_password: str | None = field(default=None, repr=False)
    notify_email_from: str | None = None
    notify_email_to: tuple[str, ...] = ()
    notify_max_attempts: int = 6
    notify_backoff_seconds: int = 30

    @property
    def create_countries(self) -> list[str]:
        """Countries whose create scope is configured, in the order Norway, Sweden, Finland."""
        if self.auth_mode == "self_signed_jwt":
            return list(COUNTRIES)
        return [code for code in COUNTRIES if f"loan-application:create:{code}" in self.scopes]

    @property
    def webhook_url(self) -> str:
        return self.public_url.rstrip("/") + self.webhook_path

    @property
    def staff_sso_enabled(self) -> bool:
        return bool(self.oidc_issuer)


class _Reader:
    """Reads raw values, with `NAME_FILE` for secrets, and turns problems into SettingsError."""

    def __init__(self, env: Mapping):
        self.env = env

    @overload
    def text(self, name: str, default: str, *, secret: bool = False) -> str: ...
    @overload
    def text(self, name: str, default: None = None, *, secret: bool = False) -> str | None: ...
    def text(self, name: str, default: str | None = None, *, secret: bool = False) -> str | None:
        value = self.env.get(name)
        value = value.strip() if isinstance(value, str) else value
        if secret and self.env.get(f"{name}_FILE"):
            if value:  # which one the operator meant cannot be guessed; the other may be a stale left-over
                raise SettingsError(f"{name} and {name}_FILE are both set: keep one")
            value = self._file(name, self.env[f"{name}_FILE"])
        return value if value else default

    @staticmethod
    def _file(name: str, path: str) -> str:
        try:
            value = Path(path).read_text(encoding="utf-8").strip()
        except OSError as error:
            raise SettingsError(f"{name}_FILE: cannot read {path} ({error.strerror})") from None
        except UnicodeDecodeError:
            raise SettingsError(f"{name}_FILE: {path} is not UTF-8 text") from None
        if not value:
            raise SettingsError(f"{name}_FILE: {path} is empty")
        return value

    def required(self, name: str, why: str = "", *, secret: bool = False) -> str:
        value = self.text(name, secret=secret)
        if not value:
            raise SettingsError(f"{name} is required{why}")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: str) -> str:
        value = self.text(name, default)
        if value not in choices:
            raise SettingsError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
        return value

    def number(self, name: str, default, low, high, kind=int):
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = kind(raw)
        except ValueError:
            raise SettingsError(f"{name} must be a number, got {raw!r}") from None
        if not low <= value <= high:
            raise SettingsError(f"{name} must be from {low} to {high}, got {raw}")
        return value

    @overload
    def url(self, name: str, default: str, *, required: bool = False) -> str: ...
    @overload
    def url(self, name: str, default: None = None, *, required: Literal[True]) -> str: ...
    @overload
    def url(self, name: str, default: None = None, *, required: bool = False) -> str | None: ...
    def url(self, name: str, default: str | None = None, *, required: bool = False) -> str | None:
        value = self.required(name) if required else self.text(name, default)
        if value is None:
            return None
        if not is_http_url(value):
            raise SettingsError(f"{name} must be an absolute http(s) URL, got {value!r}")
        return value.rstrip("/")

    def database_url(self, default: str) -> str:
        value = self.text("PORTAL_DATABASE_URL", default, secret=True)  # it holds the database's password
        try:
            backend = make_url(value).get_backend_name()
        except ArgumentError:
            backend = None
        if backend not in ("sqlite", "postgresql"):
            raise SettingsError(
                "PORTAL_DATABASE_URL must be a SQLite or PostgreSQL URL (sqlite:///path/portal.db, "
                "postgresql+psycopg://user:password@host/name)"
            )
        return value

    def redis_url(self) -> str | None:
        value = self.text("PORTAL_REDIS_URL", secret=True)
        if value and urlsplit(value).scheme not in ("redis", "rediss", "unix"):
            raise SettingsError("PORTAL_REDIS_URL must be a redis://, rediss:// or unix:// URL")
        return value


def is_http_url(value: str, any_host: bool = False) -> bool:
    """An absolute http(s) URL with a host (`any_host`: whatever it holds) and, if any, a port a socket can have; no
    spaces."""
    try:
        parts = urlsplit(value)
        port_ok = parts.port is None or parts.port > 0  # urlsplit refuses ports past 65535 when asked
    except ValueError:  # "http://[::1" and the like
        return False
    return (
        parts.scheme in ("http", "https")
        and (bool(parts.hostname) if any_host else _is_a_host(parts.hostname))
        and port_ok
        and not any(c.isspace() for c in value)
    )


def _is_a_host(name: str | None) -> bool:
    """A name or an address a host can have: letters of any script, digits, dots, hyphens, underscores (a compose
    service's name); colons in an IPv6 address ("http://%00/" went to the Flow Service, an attack)."""
    return bool(name) and all(c.isalnum() or c in ".-_:" for c in name or "")


def _token_url(read: _Reader) -> str:
    explicit = read.url("FLOW_TOKEN_URL")
    if explicit:
        return explicit
    oidc = read.url("FLOW_OIDC_URL", required=True)
    realm = read.required("FLOW_REALM", " (or set FLOW_TOKEN_URL)")
    return f"{oidc}/realms/{realm}/protocol/openid-connect/token"


def _scopes(read: _Reader, required: bool) -> tuple[str, ...]:
    scopes = tuple((read.text("FLOW_SCOPES") or "").split())
    if required and not scopes:
        raise SettingsError("FLOW_SCOPES is required: the identity provider needs the scopes to grant")
    for scope in scopes:
        if not _SCOPE.fullmatch(scope):
            raise SettingsError(f"FLOW_SCOPES has an invalid scope {scope!r}")
    return scopes


def _jwt_key_path(read: _Reader) -> Path:
    path = Path(read.required("FLOW_JWT_PRIVATE_KEY", " when FLOW_AUTH_MODE=self_signed_jwt"))
    if not path.is_file():
        raise SettingsError(f"FLOW_JWT_PRIVATE_KEY: no file at {path}")
    try:
        load_private_key(path)  # a junk, public or short key is a configuration error, not a first-request traceback
    except PrivateKeyError as error:
        raise SettingsError(f"FLOW_JWT_PRIVATE_KEY: {error}") from None
    return path


def _webhook_secrets(read: _Reader, scheme: str, name: str = "FLOW_WEBHOOK_SECRETS") -> tuple[str, ...]:
    raw = read.text(name, "", secret=True)
    secrets = tuple(part.strip() for part in raw.split(",") if part.strip())
    if scheme == "standard-webhooks":
        for index, secret in enumerate(secrets):
            if not is_whsec(secret):
                raise SettingsError(f"{name}: secret #{index + 1} must be whsec_ followed by base64")
    return secrets


def _retired_secrets(read: _Reader, scheme: str) -> tuple[str, ...]:
    """Old secrets of a rotation: never accepted, only used to say that a sender still signs with one."""
    retired = _webhook_secrets(read, scheme, "FLOW_WEBHOOK_RETIRED_SECRETS")
    live = set(_webhook_secrets(read, scheme))
    for index, secret in enumerate(retired):
        if secret in live:
            raise SettingsError(
                f"FLOW_WEBHOOK_RETIRED_SECRETS: secret #{index + 1} is also in FLOW_WEBHOOK_SECRETS; "
                "a secret is either accepted or retired"
            )
    return retired


def is_whsec(secret: str) -> bool:
    """A Standard Webhooks secret: `whsec_` and base64 of some bytes."""
    try:
        return secret.startswith("whsec_") and bool(base64.b64decode(secret[6:], validate=True))
    except (ValueError, binascii.Error):
        return False


def _notify_secret(read: _Reader, url: str | None) -> str | None:
    secret = read.text("PORTAL_NOTIFY_SECRET", secret=True)
    if url and not secret:
        raise SettingsError("PORTAL_NOTIFY_SECRET is required when PORTAL_NOTIFY_URL is set (whsec_ and base64)")
    if secret and not is_whsec(secret):
        raise SettingsError("PORTAL_NOTIFY_SECRET must be whsec_ followed by base64")
    return secret


def _email_addresses(read: _Reader, name: str, required: bool) -> tuple[str, ...]:
    raw = read.text(name, "") or ""
    addresses = tuple(part.strip() for part in raw.split(",") if part.strip())
    if required and not addresses:
        raise SettingsError(f"{name} is required when PORTAL_SMTP_HOST is set")
    for address in addresses:
        if not _EMAIL.fullmatch(address):
            raise SettingsError(f"{name}: {address!r} is not an e-mail address")
    return addresses


def _timezone(read: _Reader) -> str:
    name = read.text("PORTAL_TIMEZONE", "Europe/Oslo")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingsError(f"PORTAL_TIMEZONE: unknown time zone {name!r}") from None
    return name


def _secret_key(read: _Reader, testing: bool) -> str:
    key = read.text("PORTAL_SECRET_KEY", secret=True)
    if not key and testing:
        return "testing-only-secret-key"
    if not key:
        raise SettingsError("PORTAL_SECRET_KEY is required (a long random string)")
    if len(key) < 16:
        raise SettingsError("PORTAL_SECRET_KEY must be at least 16 characters")
    return key


def _index_key(read: _Reader, testing: bool) -> bytes:
    key = read.text("PORTAL_INDEX_KEY", secret=True)
    if not key and testing:
        return b"testing-only-index-key"
    if not key:
        raise SettingsError("PORTAL_INDEX_KEY is required (a long random string; it keys the national-id hashes)")
    if len(key) < 16:
        raise SettingsError("PORTAL_INDEX_KEY must be at least 16 characters")
    return key.encode()


def _webhook_fields(read: _Reader) -> tuple[tuple[str, str], ...]:
    try:
        return parse_fields(read.text("FLOW_WEBHOOK_FIELDS"))
    except ValueError as error:
        raise SettingsError(f"FLOW_WEBHOOK_FIELDS: {error}") from None


def _header_name(read: _Reader, name: str, default: str) -> str:
    value = read.text(name, default)
    if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+", value):
        raise SettingsError(f"{name} must be an HTTP header name, got {value!r}")
    return value


def _webhook_path(read: _Reader) -> str:
    path = read.text("FLOW_WEBHOOK_PATH", "/webhooks/flow")
    if not re.fullmatch(r"(/[A-Za-z0-9._~-]+)+", path):
        raise SettingsError(f"FLOW_WEBHOOK_PATH must be a path like /webhooks/flow, got {path!r}")

    return path


def _staff_sso(read: _Reader) -> tuple[str | None, str | None, str | None]:
    issuer = read.url("PORTAL_OIDC_ISSUER")
    if not issuer:
        return None, None, None
    why = " when PORTAL_OIDC_ISSUER is set"
    return (
        issuer,
        read.required("PORTAL_OIDC_CLIENT_ID", why),
        read.required("PORTAL_OIDC_CLIENT_SECRET", why, secret=True),
    )


# The kinds of record a subject request covers (portal.subjects), in the order of its export document.
SUBJECT_RECORD_KINDS = ("flows", "events", "incidents", "notifications", "create_submissions", "audit", "access_log")


def _legal_hold(read: _Reader) -> tuple[str, ...]:
    """The kinds of a person's records an erasure request keeps (the audit log, unless a policy says otherwise)."""
    raw = read.text("PORTAL_LEGAL_HOLD", "audit")
    kinds = tuple(part.strip() for part in raw.split(",") if part.strip() and part.strip() != "none")
    unknown = [kind for kind in kinds if kind not in SUBJECT_RECORD_KINDS]
    if unknown:
        raise SettingsError(f"PORTAL_LEGAL_HOLD: {unknown[0]!r} is none of {', '.join(SUBJECT_RECORD_KINDS)}")
    return kinds


DEFAULT_REVEAL_PURPOSES = "Customer contact,Identity check,Complaint handling,Fraud investigation"


def _reveal_purposes(read: _Reader) -> tuple[str, ...]:
    """Why staff may reveal a national id: a short list (free text is always offered beside it)."""
    raw = read.text("PORTAL_REVEAL_PURPOSES", DEFAULT_REVEAL_PURPOSES)
    purposes = tuple(dict.fromkeys(part.strip() for part in raw.split(",") if part.strip()))
    if (
        not purposes
        or len(purposes) > 20
        or any(len(purpose) > 80 or not purpose.isprintable() for purpose in purposes)
    ):
        raise SettingsError("PORTAL_REVEAL_PURPOSES must be 1-20 comma-separated purposes of at most 80 characters")
    return purposes


def _key_prefix(read: _Reader) -> str:
    prefix = read.text("PORTAL_REDIS_PREFIX", "flow-portal")
    if not re.fullmatch(r"[A-Za-z0-9._:-]{1,64}", prefix):
        raise SettingsError(f"PORTAL_REDIS_PREFIX must be 1-64 letters, digits or . _ : -, got {prefix!r}")
    return prefix


def _trusted_hosts(read: _Reader, public_url: str) -> tuple[str, ...]:
    """Host names requests may carry: the public URL's, loopback (health checks), and PORTAL_TRUSTED_HOSTS."""
    extra = [_host_name(name.strip().lower()) for name in (read.text("PORTAL_TRUSTED_HOSTS") or "").split(",")]
    public = urlsplit(public_url).hostname or ""
    return tuple(
        dict.fromkeys(
            [
                _host_name(public, "PORTAL_PUBLIC_URL") if public else "",
                *LOOPBACK_HOSTS,
                *(name for name in extra if name),
            ]
        )
    )


_HOST_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
# A name, or with a leading dot every name under a domain (werkzeug's rule): ".lender.example".
_TRUSTED_NAME = re.compile(rf"(?P<under>\.)?{_HOST_LABEL}(?P<more>(?:\.{_HOST_LABEL})*)")


def _host_name(name: str, setting: str = "PORTAL_TRUSTED_HOSTS") -> str:
    """A host name as the Host check takes it: names as written, IPv6 addresses in brackets ("::1" → "[::1]")."""
    named = _TRUSTED_NAME.fullmatch(name)
    if not name or (named and not (named["under"] and not named["more"])):
        return name
    if named:  # ".com": every host under a top-level domain
        raise SettingsError(f"{setting}: {name!r} would trust every host under it; name your own domain")
    try:
        return f"[{ipaddress.IPv6Address(name.strip('[]')).compressed}]"
    except ValueError:
        raise SettingsError(f"{setting}: {name!r} is not a host name") from None


def _metrics_token(read: _Reader) -> str | None:
    token = read.text("PORTAL_METRICS_TOKEN", secret=True)
    if token and len(token) < 16:
        raise SettingsError("PORTAL_METRICS_TOKEN must be at least 16 characters")
    return token


def _metrics_allow(read: _Reader) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """Addresses and CIDR blocks that may scrape /metrics without the token; `none` for none."""
    text = read.text("PORTAL_METRICS_ALLOW", "127.0.0.1/32,::1/128")
    parts = [] if text.lower() == "none" else [part.strip() for part in text.split(",") if part.strip()]
    try:
        return tuple(ipaddress.ip_network(part, strict=False) for part in parts)
    except ValueError as error:
        raise SettingsError(f"PORTAL_METRICS_ALLOW: {error}") from None


def _notification_settings(read: _Reader) -> dict:
    url = read.url("PORTAL_NOTIFY_URL")
    smtp_host = read.text("PORTAL_SMTP_HOST")
    return {
        "notify_url": url,
        "notify_secret": _notify_secret(read, url),
        "smtp_host": smtp_host,
        "smtp_port": read.number("PORTAL_SMTP_PORT", 587, 1, 65535),
        "smtp_security": read.choice("PORTAL_SMTP_SECURITY", ("starttls", "tls", "none"), "starttls"),
        "smtp_user": read.text("PORTAL_SMTP_USER"),
        "smtp_password": read.text("PORTAL_SMTP_PASSWORD", secret=True),
        "notify_email_from": (_email_addresses(read, "PORTAL_NOTIFY_EMAIL_FROM", bool(smtp_host)) or (None,))[0],
        "notify_email_to": _email_addresses(read, "PORTAL_NOTIFY_EMAIL_TO", bool(smtp_host)),
        "notify_max_attempts": read.number("PORTAL_NOTIFY_MAX_ATTEMPTS", 6, 1, 20),
        "notify_backoff_seconds": read.number("PORTAL_NOTIFY_BACKOFF_SECONDS", 30, 1, 3600),
    }


def load_settings(env: Mapping | None = None, *, instance_path: str = "instance", testing=False) -> Settings:
    """Build the settings from `env` (default: the process environment)."""
    read = _Reader(os.environ if env is None else env)
    auth_mode = read.choice("FLOW_AUTH_MODE", AUTH_MODES, "client_credentials")
    uses_secret = auth_mode == "client_credentials"
    webhook_scheme = read.choice("FLOW_WEBHOOK_SCHEME", WEBHOOK_SCHEMES, "standard-webhooks")
    public_url = read.url("PORTAL_PUBLIC_URL", "http://127.0.0.1:5000")
    why_secret = " when FLOW_AUTH_MODE=client_credentials"
    why_jwt = " when FLOW_AUTH_MODE=self_signed_jwt"
    oidc_issuer, oidc_client_id, oidc_client_secret = _staff_sso(read)
    settings = Settings(
        environment=read.choice("FLOW_ENVIRONMENT", ENVIRONMENTS, "test"),
        api_url=read.url("FLOW_API_URL", required=True),
        auth_mode=auth_mode,
        token_url=_token_url(read) if uses_secret else None,
        client_id=read.required("FLOW_CLIENT_ID", why_secret) if uses_secret else None,
        client_secret=read.required("FLOW_CLIENT_SECRET", why_secret, secret=True) if uses_secret else None,
        scopes=_scopes(read, required=uses_secret),
        token_auth_method=read.choice("FLOW_TOKEN_AUTH_METHOD", TOKEN_AUTH_METHODS, "client_secret_post"),
        token_leeway=read.number("FLOW_TOKEN_LEEWAY", 30, 0, 3600),
        jwt_private_key=None if uses_secret else _jwt_key_path(read),
        jwt_kid=None if uses_secret else read.required("FLOW_JWT_KID", why_jwt),
        jwt_issuer=None if uses_secret else read.required("FLOW_JWT_ISSUER", why_jwt),
        jwt_audience=None if uses_secret else read.required("FLOW_JWT_AUDIENCE", why_jwt),
        jwt_lifetime=read.number("FLOW_JWT_LIFETIME", 60, 5, 3600),
        connect_timeout=read.number("FLOW_CONNECT_TIMEOUT", 3.05, 0.01, 120, kind=float),
        read_timeout=read.number("FLOW_READ_TIMEOUT", 10.0, 0.01, 600, kind=float),
        retries=read.number("FLOW_RETRIES", 2, 0, 10),
        retry_budget=read.number("FLOW_RETRY_BUDGET", 8.0, 0, 300, kind=float),
        webhook_secrets=_webhook_secrets(read, webhook_scheme),
        webhook_scheme=webhook_scheme,
        webhook_header=_header_name(read, "FLOW_WEBHOOK_HEADER", "X-Flow-Signature"),
        webhook_path=_webhook_path(read),
        webhook_max_bytes=read.number("FLOW_WEBHOOK_MAX_BYTES", 256 * 1024, 1024, 16 * 1024 * 1024),
        webhook_shape=read.choice("FLOW_WEBHOOK_SHAPE", SHAPES, "auto"),
        webhook_fields=_webhook_fields(read),
        webhook_id_header=_header_name(read, "FLOW_WEBHOOK_ID_HEADER", "X-Flow-Event-Id"),
        secret_key=_secret_key(read, testing),
        index_key=_index_key(read, testing),
        database_url=read.database_url(f"sqlite:///{Path(instance_path, 'portal.db').resolve()}"),
        redis_url=read.redis_url(),
        public_url=public_url,
        redirect_url=read.url("PORTAL_REDIRECT_URL", public_url + "/consent-complete"),
        timezone=_timezone(read),
        oidc_issuer=oidc_issuer,
        oidc_client_id=oidc_client_id,
        oidc_client_secret=oidc_client_secret,
        rejected_keep=read.number("PORTAL_REJECTED_KEEP", 1000, 10, 1_000_000),
        log_level=read.choice("PORTAL_LOG_LEVEL", ("DEBUG", "INFO", "WARNING", "ERROR"), "INFO"),
        trusted_proxies=read.number("PORTAL_TRUSTED_PROXIES", 0, 0, 5),
        db_connect_timeout=read.number("PORTAL_DB_CONNECT_TIMEOUT", 5.0, 1, 120, kind=float),
        db_statement_timeout=read.number("PORTAL_DB_STATEMENT_TIMEOUT", 10.0, 0.1, 3600, kind=float),
        metrics_token=_metrics_token(read),
        metrics_allow=_metrics_allow(read),
        session_idle_seconds=60 * read.number("PORTAL_SESSION_IDLE_MINUTES", 30, 1, 24 * 60),
        session_max_seconds=3600 * read.number("PORTAL_SESSION_MAX_HOURS", 10, 1, 24 * 7),
        redis_prefix=_key_prefix(read),
        trusted_hosts=_trusted_hosts(read, public_url),
        # Also the replay window of hmac-sha256 events, so never 0 (forever): 36500 keeps them a century.
        event_retention_days=read.number("PORTAL_EVENT_RETENTION_DAYS", 90, 1, 36500),
        rejected_retention_days=read.number("PORTAL_REJECTED_RETENTION_DAYS", 30, 0, 36500),
        # The audit log is the evidence of who saw personal data: ten years unless a policy says otherwise.
        audit_retention_days=read.number("PORTAL_AUDIT_RETENTION_DAYS", 3650, 0, 36500),
        # What a person may ask about (C-579/21): as long as the audit log, unless a policy says otherwise.
        access_log_retention_days=read.number("PORTAL_ACCESS_LOG_RETENTION_DAYS", 3650, 0, 36500),
        legal_hold=_legal_hold(read),
        gone_flow_retention_days=read.number("PORTAL_GONE_FLOW_RETENTION_DAYS", 90, 0, 36500),
        reveal_purposes=_reveal_purposes(read),
        webhook_retired_secrets=_retired_secrets(read, webhook_scheme),
        stuck_after_hours=read.number("PORTAL_STUCK_AFTER_HOURS", 48, 1, 24 * 365),
        gap_grace_seconds=read.number("PORTAL_GAP_GRACE_SECONDS", 300, 0, 86_400),
        **_notification_settings(read),
    )
    if settings.environment == "production":
        # gunicorn.conf.py tells its workers their count; a command run beside them reads the operator's own setting
        workers = read.number("PORTAL_WORKERS", None, 1, 1024) or read.number("WEB_CONCURRENCY", None, 1, 1024)
        problems = production_problems(settings, workers=workers)
        if problems:
            raise SettingsError(problems[0])
    return settings
