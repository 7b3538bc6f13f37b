"""The command line: keys, check (with each diagnosis), users."""

import getpass
import json
import stat
import uuid

import pytest
from joserfc.jwk import RSAKey
from sqlalchemy import select
from support import PASSWORD, REDIS_PREFIX, add_user, jwt_settings, migrated, portal_config, sign_in

from portal import create_app
from portal.extensions import db
from portal.models import AuditEntry, User


@pytest.fixture
def cli_app(sandbox, sqlite_url):
    def build(**overrides):
        return migrated(create_app(portal_config(sandbox.url, sqlite_url, **overrides)))

    return build


def invoke(app, *args, input=None):
    return app.test_cli_runner().invoke(args=list(args), input=input)


def test_unlock_with_redis_adds_no_note(make_app, redis_url):
    app = make_app(PORTAL_REDIS_URL=redis_url, PORTAL_REDIS_PREFIX=f"{REDIS_PREFIX}-{uuid.uuid4().hex[:8]}")
    add_user(app, "kari")
    assert invoke(app, "users", "unlock", "kari").output.strip() == "kari may sign in again"


# -- keys --------------------------------------------------------------------------------------


def test_keys_generate_writes_a_private_key_0600_and_a_public_jwks(cli_app, tmp_path):
    tmp_path = tmp_path / "keys"
    result = invoke(cli_app(), "keys", "generate", "--kid", "lender-2026", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    private, public = tmp_path / "lender-2026.pem", tmp_path / "lender-2026.jwks.json"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    key = RSAKey.import_key(private.read_bytes())
    assert key.is_private and key.public_key.key_size == 4096
    jwks = json.loads(public.read_text())
    assert jwks["keys"][0]["kid"] == "lender-2026" and "d" not in jwks["keys"][0]
    assert RSAKey.import_key(jwks["keys"][0]).public_key.public_numbers() == key.public_key.public_numbers()
    again = invoke(cli_app(), "keys", "generate", "--kid", "lender-2026", "--out", str(tmp_path))
    assert again.exit_code != 0 and "--force" in again.output
    assert RSAKey.import_key(private.read_bytes()).public_key.public_numbers() == key.public_key.public_numbers()


def test_keys_generate_refuses_short_keys_and_bad_kids(cli_app, tmp_path):
    tmp_path = tmp_path / "keys"
    short = invoke(cli_app(), "keys", "generate", "--kid", "k", "--bits", "2048", "--out", str(tmp_path))
    assert short.exit_code != 0 and "4096" in short.output
    bad = invoke(cli_app(), "keys", "generate", "--kid", "../escape", "--out", str(tmp_path))
    assert bad.exit_code != 0
    assert not tmp_path.exists() or not list(tmp_path.iterdir())


# -- check -------------------------------------------------------------------------------------


def test_check_ok_with_client_credentials(cli_app):
    result = invoke(cli_app(), "check")
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK: test environment")
    assert "token lifetime 300 s" in result.output and "loan-application:create:no" in result.output
    assert "demo-secret" not in result.output


def test_check_ok_with_self_signed_jwt(make_sandbox, trusted_keys_file, client_key, sqlite_url):
    sandbox = make_sandbox(SANDBOX_TRUSTED_KEYS=str(trusted_keys_file))
    app = migrated(create_app(portal_config(sandbox.url, sqlite_url, **jwt_settings(client_key))))
    result = invoke(app, "check")
    assert result.exit_code == 0, result.output
    assert "self_signed_jwt" in result.output


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"FLOW_CLIENT_ID": "nobody"}, "invalid_client"),
        ({"FLOW_CLIENT_SECRET": "wrong"}, "unauthorized_client"),
        ({"FLOW_SCOPES": "loan-application:create:dk"}, "invalid_scope"),
        ({"FLOW_API_URL": "http://127.0.0.1:9", "FLOW_RETRY_BUDGET": "0"}, "cannot connect"),
        ({"FLOW_OIDC_URL": "http://127.0.0.1:9"}, "cannot connect"),
    ],
)
def test_check_diagnoses(cli_app, overrides, expected):
    result = invoke(cli_app(**overrides), "check")
    assert result.exit_code != 0
    assert expected in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "demo-secret" not in result.output


def test_check_diagnoses_401_and_403_from_the_api(make_sandbox, client_key, sqlite_url, tmp_path):
    sandbox = make_sandbox()  # trusts no client key: the API refuses the JWT
    app = migrated(create_app(portal_config(sandbox.url, sqlite_url, **jwt_settings(client_key))))
    result = invoke(app, "check")
    assert result.exit_code != 0 and "401 from the API" in result.output


def test_check_diagnoses_a_malformed_answer(sandbox, cli_app):
    sandbox.fault(mode="malformed")
    result = invoke(cli_app(), "check")
    assert result.exit_code != 0 and "malformed answer" in result.output


def test_check_diagnoses_tls(sandbox, cli_app):
    https_url = sandbox.url.replace("http://", "https://")
    result = invoke(cli_app(FLOW_OIDC_URL=https_url), "check")
    assert result.exit_code != 0 and result.output.startswith("Error: TLS")


# -- users -------------------------------------------------------------------------------------


def test_users_lifecycle(cli_app):
    app = cli_app()
    created = invoke(app, "users", "create", "kari", "--role", "operator", input=f"{PASSWORD}\n{PASSWORD}\n")
    assert created.exit_code == 0, created.output
    assert invoke(app, "users", "create", "kari", input=f"{PASSWORD}\n{PASSWORD}\n").exit_code != 0
    assert invoke(app, "users", "create", "ola", "--password", "short").exit_code != 0
    # The demo's sign-in (README, scripts/demo) must pass the password rules.
    assert invoke(app, "users", "create", "demo", "--password", "demo-password").exit_code == 0
    assert invoke(app, "users", "set-role", "kari", "admin").exit_code == 0
    last_admin = invoke(app, "users", "disable", "kari")
    assert last_admin.exit_code != 0 and "last active admin" in last_admin.output
    assert invoke(app, "users", "create", "ola", "--role", "admin", "--password", PASSWORD).exit_code == 0
    assert invoke(app, "users", "disable", "kari").exit_code == 0
    listing = invoke(app, "users", "list").output
    assert "kari" in listing and "admin" in listing and "disabled" in listing
    assert PASSWORD not in listing
    assert invoke(app, "users", "disable", "nobody").exit_code != 0
    assert invoke(app, "users", "set-role", "kari", "emperor").exit_code != 0


def test_an_account_for_single_sign_on_only_needs_no_password(cli_app):
    app = cli_app()
    created = invoke(app, "users", "create", "ingrid", "--role", "operator", "--sso-subject", "staff-42")
    assert created.exit_code == 0 and "Password" not in created.output, created.output
    twice = invoke(app, "users", "create", "ingrid2", "--sso-subject", "staff-42")
    assert twice.exit_code == 1 and "ingrid is linked to that single sign-on subject" in twice.output
    with app.app_context():
        ingrid = db.session.scalar(select(User).filter_by(username="ingrid"))
        assert ingrid.sso_subject == "staff-42" and ingrid.password_hash is None
        assert not ingrid.check_password("")
    asked = invoke(app, "users", "create", "ola", input=f"{PASSWORD}\n{PASSWORD}\n")
    assert asked.exit_code == 0 and "Password" in asked.output


def test_users_enable_set_password_and_sign_out(cli_app):
    app = cli_app(WTF_CSRF_ENABLED=False)
    invoke(app, "users", "create", "kari", "--role", "operator", "--password", PASSWORD)
    browser = app.test_client()
    assert sign_in(browser, "kari").status_code == 302
    assert invoke(app, "users", "set-password", "kari", "--password", "short").exit_code != 0
    guessable = invoke(app, "users", "set-password", "kari", "--password", "1234567890")
    assert guessable.exit_code != 0 and "too easy to guess" in guessable.output
    assert browser.get("/flows").status_code == 200  # a refused change ends nothing
    changed = invoke(app, "users", "set-password", "kari", input="a new long password\n" * 2)
    assert changed.exit_code == 0, changed.output
    assert browser.get("/flows").headers["Location"].startswith("/login")
    assert sign_in(browser, "kari").status_code == 200  # the old password no longer works
    assert sign_in(browser, "kari", "a new long password").status_code == 302
    assert invoke(app, "users", "sign-out", "kari").exit_code == 0
    assert browser.get("/flows").headers["Location"].startswith("/login")
    nobody = invoke(app, "users", "set-password", "nobody", input="never asked for\n" * 2)
    assert nobody.exit_code != 0 and "no user named 'nobody'" in nobody.output
    assert "Password" not in nobody.output, "an unknown name is said before a password is asked for"
    assert invoke(app, "users", "set-role", "KARI", "viewer").output.strip() == "kari is now viewer"
    for command, said in (("disable", "disabled kari"), ("enable", "enabled kari"), ("unlock", "kari may sign")):
        assert invoke(app, "users", command, "KaRi").output.startswith(said), command
    # The counts of a portal without Redis are in its own memory: a command cannot clear them, and says so (an attack).
    assert "restart the portal to clear them there" in invoke(app, "users", "unlock", "kari").output
    assert "every session of kari ends" in invoke(app, "users", "sign-out", "KARI").output
    assert invoke(app, "users", "disable", "kari").exit_code == 0
    assert invoke(app, "users", "enable", "kari").exit_code == 0
    assert "active" in invoke(app, "users", "list").output


def test_users_changes_are_audited_as_the_command_line_user(cli_app):
    app = cli_app()
    invoke(app, "users", "create", "kari", "--role", "admin", "--password", PASSWORD)
    invoke(app, "users", "create", "ola", "--password", PASSWORD)
    for command in (("set-role", "ola", "operator"), ("disable", "ola"), ("enable", "ola"), ("sign-out", "ola")):
        assert invoke(app, "users", *command).exit_code == 0
    invoke(app, "users", "set-password", "ola", "--password", "a new long password")
    assert invoke(app, "users", "disable", "kari").exit_code != 0  # the last admin: refused, not audited
    with app.app_context():
        rows = [(row.username, row.action, row.target, row.source_ip) for row in db.session.query(AuditEntry)]
    me = f"cli:{getpass.getuser()}"
    assert rows == [
        (me, "account.create", "kari (admin)", None),
        (me, "account.create", "ola (viewer)", None),
        (me, "account.role", "ola: viewer -> operator", None),
        (me, "account.disable", "ola", None),
        (me, "account.enable", "ola", None),
        (me, "account.sign_out_everywhere", "ola", None),
        (me, "account.password", "ola", None),
    ]


@pytest.mark.parametrize(
    "args",
    [
        ["events", "prune", "--older-than", "1000000d"],
        ["events", "export", "--since", "9999-12-31T23:59:59-23:59"],
        ["audit", "export", "--since", "9999-12-31T23:59:59-23:59"],
    ],
)
def test_times_past_what_a_date_holds_are_a_clear_error(runner, args):
    result = runner.invoke(args=args)
    assert result.exit_code == 2 and "Invalid value" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("database", "words"),
    [
        ("unmigrated", "the database has no portal tables yet"),
        ("postgresql+psycopg://postgres@127.0.0.1:9/none", "the database cannot be used"),
    ],
)
def test_a_database_the_command_cannot_use_is_one_line(sandbox, tmp_path, database, words):
    """Cron and a container's log get one line and exit 1, not a driver's traceback."""
    url = f"sqlite:///{tmp_path / 'empty.db'}" if database == "unmigrated" else database
    app = create_app(portal_config(sandbox.url, url))
    for args in (["users", "list"], ["retention", "apply"], ["flows", "sync"]):
        result = app.test_cli_runner().invoke(args=args)
        assert result.exit_code == 1, (args, result.output)
        assert words in result.output and "Traceback" not in result.output, (args, result.output)
    if database == "unmigrated":
        assert "flask --app portal db upgrade" in result.output


def flask_command(tmp_path, *args, **env):
    """The `flask` command as an operator runs it, in an empty directory with only `env` set."""
    import subprocess
    import sys

    environment = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)} | env
    command = [sys.executable, "-m", "flask", "--app", "portal", *args]
    return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=60)


def test_a_key_pair_comes_before_the_settings_that_name_it(tmp_path):
    """README's self-signed JWT set-up names keys/KID.pem in FLOW_JWT_PRIVATE_KEY; `keys generate` makes that file
    though the configuration cannot start without it (nor with anything else missing)."""
    settings = {"FLOW_AUTH_MODE": "self_signed_jwt", "FLOW_JWT_PRIVATE_KEY": "keys/k1.pem"}
    made = flask_command(tmp_path, "keys", "generate", "--kid", "k1", **settings)
    assert made.returncode == 0, made.stderr
    assert stat.S_IMODE((tmp_path / "keys" / "k1.pem").stat().st_mode) == 0o600
    assert json.loads((tmp_path / "keys" / "k1.jwks.json").read_text())["keys"][0]["kid"] == "k1"


def test_help_lists_the_commands_under_the_configuration_error(tmp_path):
    shown = flask_command(tmp_path, "--help")
    assert shown.returncode == 0
    assert "configuration error: FLOW_API_URL is required" in shown.stderr and "keys" in shown.stdout
    refused = flask_command(tmp_path, "users", "list")
    assert refused.returncode == 2 and "FLOW_API_URL is required" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_command_runs_after_thousands_of_apps_in_one_process(make_app):
    """Found by CI: every app made in a process wrapped the module's command groups once more, and after enough
    apps (the test run makes thousands) `flows sync` ended in a RecursionError."""
    import sys

    from flask import Flask

    from portal.cli import init_app, users

    app = make_app()
    for _ in range(sys.getrecursionlimit()):
        init_app(Flask(__name__))  # what each app made in the process does
    result = app.test_cli_runner().invoke(args=["users", "list"])
    assert result.exit_code == 0, result.output
    assert users.invoke.__name__ == "invoke_saying_what_is_wrong"
