"""Settings: each missing or malformed one stops start-up with one line naming it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import portal_config

from portal.settings import SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[1]


def settings_with(**changes):
    config = portal_config("http://127.0.0.1:8081", "sqlite://") | changes
    return load_settings({key: value for key, value in config.items() if value is not None})


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"FLOW_API_URL": None}, "FLOW_API_URL"),
        ({"FLOW_API_URL": "flow.example"}, "FLOW_API_URL"),
        ({"FLOW_ENVIRONMENT": "staging"}, "FLOW_ENVIRONMENT"),
        ({"FLOW_AUTH_MODE": "magic"}, "FLOW_AUTH_MODE"),
        ({"FLOW_CLIENT_ID": None}, "FLOW_CLIENT_ID"),
        ({"FLOW_CLIENT_SECRET": None}, "FLOW_CLIENT_SECRET"),
        ({"FLOW_SCOPES": ""}, "FLOW_SCOPES"),
        ({"FLOW_SCOPES": 'bad"scope'}, "FLOW_SCOPES"),
        ({"FLOW_OIDC_URL": None}, "FLOW_OIDC_URL"),
        ({"FLOW_REALM": None}, "FLOW_REALM"),
        ({"FLOW_READ_TIMEOUT": "soon"}, "FLOW_READ_TIMEOUT"),
        ({"FLOW_READ_TIMEOUT": "0"}, "FLOW_READ_TIMEOUT"),
        ({"FLOW_WEBHOOK_SCHEME": "md5"}, "FLOW_WEBHOOK_SCHEME"),
        ({"FLOW_WEBHOOK_SECRETS": "not-a-whsec"}, "FLOW_WEBHOOK_SECRETS"),
        ({"FLOW_WEBHOOK_PATH": "no-slash"}, "FLOW_WEBHOOK_PATH"),
        ({"FLOW_WEBHOOK_SHAPE": "nested"}, "FLOW_WEBHOOK_SHAPE"),
        ({"FLOW_WEBHOOK_FIELDS": "colour=data.colour"}, "FLOW_WEBHOOK_FIELDS"),
        ({"FLOW_WEBHOOK_FIELDS": "type"}, "FLOW_WEBHOOK_FIELDS"),
        ({"FLOW_WEBHOOK_FIELDS": "flow_id=data..flowId"}, "FLOW_WEBHOOK_FIELDS"),
        ({"FLOW_WEBHOOK_ID_HEADER": "Event Id"}, "FLOW_WEBHOOK_ID_HEADER"),
        ({"PORTAL_SECRET_KEY": None, "TESTING": None}, "PORTAL_SECRET_KEY"),
        ({"PORTAL_SECRET_KEY": "short"}, "PORTAL_SECRET_KEY"),
        ({"PORTAL_INDEX_KEY": None, "TESTING": None}, "PORTAL_INDEX_KEY"),
        ({"PORTAL_INDEX_KEY": "short"}, "PORTAL_INDEX_KEY"),
        ({"PORTAL_TIMEZONE": "Mars/Olympus"}, "PORTAL_TIMEZONE"),
        ({"PORTAL_OIDC_ISSUER": "https://sso.example"}, "PORTAL_OIDC_CLIENT_ID"),
        ({"FLOW_AUTH_MODE": "self_signed_jwt"}, "FLOW_JWT_PRIVATE_KEY"),
        ({"FLOW_AUTH_MODE": "self_signed_jwt", "FLOW_JWT_PRIVATE_KEY": "/nonexistent.pem"}, "FLOW_JWT_PRIVATE_KEY"),
        ({"FLOW_CLIENT_SECRET": None, "FLOW_CLIENT_SECRET_FILE": "/nonexistent"}, "FLOW_CLIENT_SECRET_FILE"),
        ({"FLOW_API_URL": "http://[::1"}, "FLOW_API_URL"),
        ({"FLOW_API_URL": "http://exa mple.com"}, "FLOW_API_URL"),
        ({"FLOW_API_URL": "http://flow.example:99999"}, "FLOW_API_URL"),
        ({"PORTAL_DATABASE_URL": "garbage"}, "PORTAL_DATABASE_URL"),
        ({"PORTAL_DATABASE_URL": "mysql://user@db/portal"}, "PORTAL_DATABASE_URL"),
        ({"PORTAL_REDIS_URL": "garbage"}, "PORTAL_REDIS_URL"),
        ({"FLOW_WEBHOOK_HEADER": "bad header"}, "FLOW_WEBHOOK_HEADER"),
        ({"PORTAL_TRUSTED_HOSTS": "a..b"}, "PORTAL_TRUSTED_HOSTS"),  # every request refused by a 500
        ({"PORTAL_TRUSTED_HOSTS": "."}, "PORTAL_TRUSTED_HOSTS"),  # "evil.example." trusted
        ({"PORTAL_TRUSTED_HOSTS": ".com"}, "PORTAL_TRUSTED_HOSTS"),  # every host under com
        ({"PORTAL_TRUSTED_HOSTS": "-portal.example"}, "PORTAL_TRUSTED_HOSTS"),
        ({"PORTAL_PUBLIC_URL": "http://a..b:5000"}, "PORTAL_PUBLIC_URL"),
    ],
)
def test_bad_settings_name_themselves(changes, named):
    with pytest.raises(SettingsError) as raised:
        settings_with(**changes)
    message = str(raised.value)
    assert named in message and "\n" not in message


def test_trusted_hosts_take_names_addresses_and_every_name_under_a_domain():
    settings = settings_with(PORTAL_TRUSTED_HOSTS="Portal.Lender.example, .lender.example, 10.0.0.5, ::2")
    assert {"portal.lender.example", ".lender.example", "10.0.0.5", "[::2]"} <= set(settings.trusted_hosts)


def test_defaults():
    settings = settings_with(FLOW_ENVIRONMENT=None, FLOW_WEBHOOK_SECRETS=None)
    assert settings.environment == "test" and settings.auth_mode == "client_credentials"
    assert settings.token_url == "http://127.0.0.1:8081/realms/sandbox/protocol/openid-connect/token"
    assert settings.webhook_scheme == "standard-webhooks" and settings.webhook_path == "/webhooks/flow"
    assert settings.webhook_url == "http://127.0.0.1:5000/webhooks/flow"
    assert (settings.webhook_shape, settings.webhook_fields, settings.webhook_id_header) == (
        "auto",
        (),
        "X-Flow-Event-Id",
    )
    assert settings.timezone == "Europe/Oslo"
    assert settings.create_countries == ["no", "se", "fi"]


def test_token_url_override_and_file_secrets(tmp_path):
    secret_file = tmp_path / "secret"
    secret_file.write_text("from-a-file\n")
    settings = settings_with(
        FLOW_TOKEN_URL="https://idp.example/oauth2/token",
        FLOW_OIDC_URL=None,
        FLOW_REALM=None,
        FLOW_CLIENT_SECRET=None,
        FLOW_CLIENT_SECRET_FILE=str(secret_file),
        FLOW_WEBHOOK_SECRETS="whsec_c2VjcmV0LW9uZQ==, whsec_c2VjcmV0LXR3bw==",
    )
    assert settings.token_url == "https://idp.example/oauth2/token"
    assert settings.client_secret == "from-a-file"
    assert len(settings.webhook_secrets) == 2
    assert "from-a-file" not in repr(settings)


def test_create_countries_follow_the_scopes():
    assert settings_with(FLOW_SCOPES="loan-application:create:se loan-application:accept:no").create_countries == ["se"]


def start_up(settings: dict, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`flask --app portal routes` with only these FLOW_/PORTAL_ settings: what starting the portal prints."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(("FLOW_", "PORTAL_"))}
    return subprocess.run(
        [sys.executable, "-m", "flask", "--app", "portal", "routes"],
        cwd=cwd,
        env=environment | settings,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_bad_setting_stops_start_up_with_one_line():
    result = start_up({"FLOW_API_URL": "not a url", "PORTAL_SECRET_KEY": "x" * 32})
    assert result.returncode != 0
    assert (
        result.stderr.strip()
        == "portal: configuration error: FLOW_API_URL must be an absolute http(s) URL, got 'not a url'"
    )


def test_templates_and_static_resolve_from_the_repository_root(app):
    assert Path(app.root_path, app.template_folder).resolve() == ROOT / "templates"
    assert Path(app.static_folder).resolve() == ROOT / "static"
    answer = app.test_client().get("/static/vendor/bootstrap/bootstrap.min.css")
    assert answer.status_code == 200
    answer.close()


def test_webhook_fields_are_read_as_dotted_paths():
    settings = settings_with(FLOW_WEBHOOK_SHAPE="flat", FLOW_WEBHOOK_FIELDS=" type=event, flow_id=payload.flow.id ,")
    assert settings.webhook_shape == "flat"
    assert settings.webhook_fields == (("type", "event"), ("flow_id", "payload.flow.id"))


def _key_files(tmp_path) -> dict[str, Path]:
    from joserfc.jwk import RSAKey

    short = RSAKey.generate_key(2048)
    files = {
        "junk": b"not a key at all\n",
        "public": short.as_pem(private=False),
        "short": short.as_pem(private=True),
    }
    paths = {}
    for name, content in files.items():
        paths[name] = tmp_path / f"{name}.pem"
        paths[name].write_bytes(content)
    return paths


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("junk", "is not an RSA private key in PEM form"),
        ("public", "holds a public key; the private key is needed"),
        ("short", "is a 2048-bit key; at least 4096 bits are required"),
    ],
)
def test_an_unusable_private_key_is_a_setting_error(tmp_path, kind, reason):
    key = _key_files(tmp_path)[kind]
    with pytest.raises(SettingsError) as raised:
        settings_with(FLOW_AUTH_MODE="self_signed_jwt", FLOW_JWT_PRIVATE_KEY=str(key), FLOW_JWT_KID="k1")
    assert str(raised.value) == f"FLOW_JWT_PRIVATE_KEY: {key} {reason}"


def test_a_junk_private_key_stops_start_up_with_one_line(tmp_path):
    key = _key_files(tmp_path)["junk"]
    settings = {name: str(value) for name, value in portal_config("http://127.0.0.1:8081", "sqlite://").items()}
    settings |= {"FLOW_AUTH_MODE": "self_signed_jwt", "FLOW_JWT_PRIVATE_KEY": str(key), "FLOW_JWT_KID": "k1"}
    settings.pop("TESTING")
    result = start_up(settings, cwd=tmp_path)
    assert result.returncode != 0
    assert result.stderr.strip() == (
        f"portal: configuration error: FLOW_JWT_PRIVATE_KEY: {key} is not an RSA private key in PEM form"
    )


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"\xff\xfe\x00not text", "is not UTF-8 text"), (b"  \n", "is empty")],
    ids=["not-utf8", "empty"],
)
def test_a_secret_file_that_holds_no_secret_names_the_file(tmp_path, content, words):
    path = tmp_path / "secret"
    path.write_bytes(content)
    with pytest.raises(SettingsError) as raised:
        settings_with(FLOW_CLIENT_SECRET=None, FLOW_CLIENT_SECRET_FILE=str(path))
    assert str(raised.value) == f"FLOW_CLIENT_SECRET_FILE: {path} {words}"


def test_a_blank_secret_gives_way_to_its_file(tmp_path):
    path = tmp_path / "secret"
    path.write_text("from-the-file\n")
    assert settings_with(FLOW_CLIENT_SECRET="  ", FLOW_CLIENT_SECRET_FILE=str(path)).client_secret == "from-the-file"


def test_the_database_url_with_its_password_may_come_from_a_file(tmp_path):
    path = tmp_path / "database-url"
    path.write_text("postgresql+psycopg://portal:s3cret@db/portal\n")
    settings = settings_with(PORTAL_DATABASE_URL=None, PORTAL_DATABASE_URL_FILE=str(path))
    assert settings.database_url == "postgresql+psycopg://portal:s3cret@db/portal"


def test_a_secret_given_both_directly_and_as_a_file_stops_start_up(tmp_path):
    path = tmp_path / "secret"
    path.write_text("from-the-file\n")
    with pytest.raises(SettingsError) as raised:
        settings_with(FLOW_CLIENT_SECRET="from-the-environment", FLOW_CLIENT_SECRET_FILE=str(path))
    assert str(raised.value) == "FLOW_CLIENT_SECRET and FLOW_CLIENT_SECRET_FILE are both set: keep one"


def test_database_and_redis_urls_of_the_documented_forms_are_taken():
    for url in ("sqlite:///tmp/portal.db", "postgresql+psycopg://portal:pw@db/portal", "postgresql://u@h/n"):
        assert settings_with(PORTAL_DATABASE_URL=url).database_url == url
    for url in ("redis://127.0.0.1:6379/0", "rediss://:pw@cache.example:6380/1", "unix:///run/redis.sock"):
        assert settings_with(PORTAL_REDIS_URL=url).redis_url == url


@pytest.mark.parametrize(
    "path", ["/healthz", "/login", "/flows", "/admin/users", "/logout", "/language", "/flows/x", "/flows/x/refresh"]
)
def test_a_webhook_path_that_is_a_page_of_the_portal_stops_it(path, capsys):
    from portal import create_app

    with pytest.raises(SystemExit) as stopped:
        create_app(portal_config("http://127.0.0.1:8081", "sqlite://", FLOW_WEBHOOK_PATH=path))
    assert stopped.value.code == 2
    assert (
        capsys.readouterr().err.strip()
        == f"portal: configuration error: FLOW_WEBHOOK_PATH is a page of the portal: {path}"
    )
