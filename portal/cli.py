"""Command-line groups on `flask --app portal`: users, audit, keys, check, events, flows, retention."""

import getpass
import json
import os
import re
import sys
import uuid
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import click
import requests
from flask import Flask
from flask.cli import AppGroup, with_appcontext
from joserfc.jwk import RSAKey
from sqlalchemy.exc import DBAPIError

from . import current
from .accounts import (
    AccountError,
    all_accounts,
    change_password,
    change_role,
    create_account,
    find_account,
    set_disabled,
    sign_out_everywhere,
    unlock_sign_in,
)
from .audit import EXPORT_FORMATS, AuditFilter, export_audit, record_audit
from .csvexport import csv_chunks
from .database import DatabaseUnavailable
from .flowapi import FlowApiError, InsufficientScope, TokenRequestRefused, Unauthorized, UpstreamProtocolError
from .flowapi.records import parse_timestamp
from .flowindex.gapcheck import GAP_CHECKS
from .flowindex.keys import national_id_readings
from .flowindex.sync import ALL, ARCHIVED, CURRENT, LeaseLost, SyncLocked, SyncReport, SyncStopped, run_sync
from .masking import mask_document, mask_text
from .models import ROLES, User
from .notify.commands import notifications, scan_after_sync
from .retention import RetentionLocked, apply_retention, under_lease
from .rsakeys import MIN_KEY_BITS
from .subjects import SERVICE_KEEPS_FLOWS, SubjectRecords, erase, export_document, find_subject
from .throttle import ThrottleUnavailable, throttle
from .webhooks.signing import signed_headers
from .webhooks.store import event_document, iter_events, prune_events

users = AppGroup("users", help="Manage staff accounts; every change is audited as cli:<your user name>.")
audit = AppGroup("audit", help="The audit log: who saw personal data or changed an account, and when.")
# A plain group: it needs no app, so it also works before the settings that name its key are complete.
keys = click.Group("keys", help="Key pairs for the self-signed JWT (seed §5.3).")
events = AppGroup("events", help="Stored webhook events: retention, export, test deliveries.")
flows = AppGroup("flows", help="The flow index: the portal's own read model of every flow.")
subjects = AppGroup("subjects", help="Subject requests: a person's stored records, exported or erased.")
retention = AppGroup("retention", help="Remove records older than their PORTAL_*_RETENTION_DAYS setting.")
PROGRESS_EVERY = 10  # pages between progress lines on a terminal
MAX_AGE = timedelta(days=36500)  # --older-than: a century, far inside what a date can go back


def _settings():
    return current.settings()


def _user(username: str) -> User:
    user = find_account(username)
    if user is None:
        raise click.ClickException(f"no user named {username!r}")
    return user


def _actor() -> str:
    """Who the audit log names for a change made here: `cli:` and the operating-system user."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no LOGNAME/USER and no password-database entry (some containers)
        name = "unknown"
    return f"cli:{name}"[:80]


def _apply(change, *args) -> None:
    try:
        change(*args, actor=_actor())
    except AccountError as error:
        raise click.ClickException(str(error)) from None


# -- users -------------------------------------------------------------------------------------


@users.command("create")
@click.argument("username")
@click.option("--role", type=click.Choice(ROLES), default="viewer", show_default=True)
@click.option(
    "--password",
    help=(
        "Prompted for when not given, unless the account signs in by single sign-on only; piped input works too, "
        "the password on two lines (typed, then again)."
    ),
)
@click.option("--sso-subject", help="Link the account to this single sign-on subject (`sub`).")
def create_user(username: str, role: str, password: str | None, sso_subject: str | None):
    """Create a staff account."""
    if password is None and sso_subject is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    _apply(create_account, username, role, password, sso_subject)
    click.echo(f"created {username} ({role})")


@users.command("list")
def list_users():
    """List staff accounts."""
    for user in all_accounts():
        state = "disabled" if user.disabled else "active"
        last = user.last_login_at.isoformat(timespec="seconds") if user.last_login_at else "never"
        click.echo(f"{user.username:<24} {user.role:<9} {state:<9} last sign-in {last}")


@users.command("disable")
@click.argument("username")
def disable_user(username: str):
    """Disable an account; its sessions end at their next request."""
    user = _user(username)
    _apply(set_disabled, user, True)
    click.echo(f"disabled {user.username}")


@users.command("enable")
@click.argument("username")
def enable_user(username: str):
    """Enable a disabled account again."""
    user = _user(username)
    _apply(set_disabled, user, False)
    click.echo(f"enabled {user.username}")


@users.command("set-role")
@click.argument("username")
@click.argument("role", type=click.Choice(ROLES))
def set_role(username: str, role: str):
    """Change an account's role."""
    user = _user(username)
    _apply(change_role, user, role)
    click.echo(f"{user.username} is now {role}")


@users.command("set-password")
@click.argument("username")
@click.option(
    "--password",
    help="Prompted for when not given; piped input works too, the password on two lines (typed, then again).",
)
def set_user_password(username: str, password: str | None):
    """Give an account a new password; its sessions end at their next request."""
    user = _user(username)  # an unknown name is said before a password is asked for
    if password is None:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    _apply(change_password, user, password)
    click.echo(f"new password set for {user.username}")


@users.command("unlock")
@click.argument("username")
def unlock_user(username: str):
    """Let USERNAME sign in again at once after too many failed attempts from anywhere."""
    user = _user(username)
    _apply(unlock_sign_in, user)
    click.echo(f"{user.username} may sign in again")
    if not throttle().shared:  # this process's own memory was cleared, not the portal's (an attack)
        click.echo(
            "note: without PORTAL_REDIS_URL the portal keeps its sign-in counts in its own memory, which this command "
            "cannot reach: restart the portal to clear them there"
        )


@users.command("sign-out")
@click.argument("username")
def sign_out_user(username: str):
    """End every session of an account, in every browser, at its next request."""
    user = _user(username)
    _apply(sign_out_everywhere, user)
    click.echo(f"every session of {user.username} ends at its next request")


# -- audit -------------------------------------------------------------------------------------


def _moment_option(ctx, param, value: str | None) -> datetime | None:
    return _since(value)


@audit.command("export")
@click.option(
    "--since", required=True, callback=_moment_option, help="Entries at or after this ISO 8601 date or time (UTC)."
)
@click.option("--until", callback=_moment_option, help="Entries before this ISO 8601 date or time (UTC).")
@click.option("--format", "fmt", type=click.Choice(list(EXPORT_FORMATS)), default="jsonl", show_default=True)
def export_audit_log(since: datetime, until: datetime | None, fmt: str):
    """Write the audit log's entries to stdout, oldest first, read in batches."""
    for chunk in export_audit(AuditFilter(since=since, until=until), fmt):
        click.echo(chunk, nl=False)


# -- keys --------------------------------------------------------------------------------------


def _write_new(path: Path, content: bytes, mode: int, force: bool) -> None:
    if path.exists() and not force:
        raise click.ClickException(f"{path} exists; use --force to replace it")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    descriptor = os.open(path, flags, mode)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(content)
    os.chmod(path, mode)


@keys.command("generate")
@click.option("--kid", required=True, help="The key id the service will look the key up by.")
@click.option("--bits", type=int, default=MIN_KEY_BITS, show_default=True)
@click.option(
    "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("keys"), show_default=True
)
@click.option("--force", is_flag=True, help="Replace existing files of this kid.")
def generate_keys(kid: str, bits: int, out_dir: Path, force: bool):
    """Write a private key (mode 0600) and its public JWKS to send to the operator."""
    if bits < MIN_KEY_BITS:
        raise click.ClickException(f"the service requires at least {MIN_KEY_BITS} bits")
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", kid):
        raise click.ClickException("a kid is 1-64 letters, digits or . _ -")
    out_dir.mkdir(parents=True, exist_ok=True)
    private_path, public_path = out_dir / f"{kid}.pem", out_dir / f"{kid}.jwks.json"
    for path in (private_path, public_path):
        if path.exists() and not force:
            raise click.ClickException(f"{path} exists; use --force to replace it")
    key = RSAKey.generate_key(bits, parameters={"kid": kid, "use": "sig", "alg": "RS256"})
    _write_new(private_path, key.as_pem(private=True), 0o600, force)
    jwks = {"keys": [key.as_dict(private=False)]}
    _write_new(public_path, json.dumps(jwks, indent=2).encode() + b"\n", 0o644, force)
    click.echo(f"private key: {private_path} (keep it secret; FLOW_JWT_PRIVATE_KEY)")
    click.echo(f"public key:  {public_path} (send this JWKS to the operator)")


# -- check -------------------------------------------------------------------------------------


def _diagnosis(error: FlowApiError) -> str:
    if error.code == "tls":
        return f"TLS: {error}"
    if error.code in ("unreachable", "token_unreachable", "connect_timeout", "token_connect_timeout", "token_timeout"):
        return f"cannot connect: {error}"
    if error.code in ("invalid_client", "unauthorized_client"):
        return f"{error.code}: the identity provider refused FLOW_CLIENT_ID / FLOW_CLIENT_SECRET"
    if error.code == "invalid_scope":
        return "invalid_scope: the identity provider refused FLOW_SCOPES"
    if isinstance(error, TokenRequestRefused) or error.code == "token_not_found":
        return f"identity provider: {error}"
    if isinstance(error, Unauthorized):
        return f"401 from the API: the token was refused ({error.code})"
    if isinstance(error, InsufficientScope):
        return f"403 from the API: the token lacks a needed scope ({error.code})"
    if isinstance(error, UpstreamProtocolError):
        return f"malformed answer: {error}"
    return f"{type(error).__name__}: {error}"


@click.command("check")
@with_appcontext
def check():
    """Fetch a token and one page of flows; print OK or a one-line diagnosis."""
    settings = _settings()
    client = current.flow_client()
    try:
        described = client.provider.describe()
        page = client.list_flows(limit=1)
    except FlowApiError as error:
        raise click.ClickException(_diagnosis(error)) from None
    click.echo(
        f"OK: {settings.environment} environment at {settings.api_url}, auth {settings.auth_mode}, "
        f"token lifetime {described['lifetime']} s, scopes {described['scopes'] or '(none)'}, "
        f"{len(page.items)} flow(s) on the first page"
    )


# -- events ------------------------------------------------------------------------------------


def _age(value: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([dhm])", value.strip())
    if not match:
        raise click.BadParameter("use a number with d, h or m, e.g. 90d")
    amount, unit = int(match[1]), match[2]
    age = timedelta(**{"d": {"days": amount}, "h": {"hours": amount}, "m": {"minutes": amount}}[unit])
    if age > MAX_AGE:
        raise click.BadParameter(f"at most {MAX_AGE.days}d")
    return age


@events.command("prune")
@click.option("--older-than", "older_than", required=True, help="Age such as 90d, 12h or 30m.")
def prune(older_than: str):
    """Delete events received longer ago than --older-than: `retention apply` for events alone, at this age."""
    cutoff = datetime.now(timezone.utc) - _age(older_than)
    with _retention_errors():
        removed = under_lease(lambda renew: prune_events(cutoff, between=renew))
        click.echo(f"removed {removed} event(s) received before {cutoff.isoformat(timespec='seconds')}")


def _since(value: str | None) -> datetime | None:
    if value is None:
        return None
    if re.fullmatch(r"\s*\d{4}-\d{2}-\d{2}\s*", value):  # a day typed alone: from its start, UTC
        value = value.strip() + "T00:00:00Z"
    moment = parse_timestamp(value)  # the service's own reading of a time: ISO 8601, UTC when no offset is given
    if moment is None:
        raise click.BadParameter("use an ISO 8601 date or time, e.g. 2026-11-01T00:00:00Z")
    return moment


EXPORT_COLUMNS = ("event_id", "type", "flow_id", "received_at", "body")


@events.command("export")
@click.option("--since", help="Only events received at or after this ISO 8601 time.")
@click.option("--format", "fmt", type=click.Choice(["jsonl", "csv"]), default="jsonl", show_default=True)
def export(since: str | None, fmt: str):
    """Write stored events to stdout, oldest first, with every national id masked."""
    found = iter_events(_since(since))
    if fmt == "csv":  # csv_cell masks the other columns
        rows = (_export_row(event, _body_text(mask_document(event_document(event)))) for event in found)
        for chunk in csv_chunks(EXPORT_COLUMNS, rows):
            click.echo(chunk, nl=False)
        return
    for event in found:
        record = dict(zip(EXPORT_COLUMNS, _export_row(event, event_document(event)), strict=True))
        click.echo(json.dumps(mask_document(record), ensure_ascii=False))


def _export_row(event, body) -> tuple:
    return (event.event_id, event.event_type, event.flow_id, event.received_at.isoformat(), body)


def _body_text(body) -> str:
    return body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)


@events.command("send-test")
@click.option("--url", help="Where to post; default: PORTAL_PUBLIC_URL + the webhook path.")
def send_test(url: str | None):
    """Sign a sample event with the first configured secret and post it, to check a deployment."""
    settings = _settings()
    if not settings.webhook_secrets:
        raise click.ClickException("FLOW_WEBHOOK_SECRETS is not set")
    event_id = f"test-{uuid.uuid4()}"
    now = datetime.now(timezone.utc)
    body = json.dumps(
        {
            "id": event_id,
            "type": "portal.test",
            "timestamp": now.isoformat(),
            "data": {"message": "test event from flask --app portal events send-test"},
        }
    )
    secret = settings.webhook_secrets[0]
    signature = signed_headers(settings.webhook_scheme, secret, event_id, now, body, settings.webhook_header)
    headers = {"content-type": "application/json"} | signature
    target = url or settings.webhook_url
    try:
        answer = requests.post(target, data=body.encode(), headers=headers, timeout=10)
    except requests.RequestException as error:
        raise click.ClickException(f"cannot post to {target}: {type(error).__name__}") from None
    if not 200 <= answer.status_code < 300:
        # a JSON answer's words, never a whole HTML page in a one-line error
        said = ": " + " ".join(answer.text.split())[:200] if "json" in answer.headers.get("Content-Type", "") else ""
        raise click.ClickException(f"{target} answered {answer.status_code} {answer.reason}{said}")
    click.echo(f"delivered {event_id} to {target}: {answer.status_code}")


# -- flows -------------------------------------------------------------------------------------


@flows.command("sync")
@click.option("--archived", is_flag=True, help="Walk archived flows only.")
@click.option(
    "--all", "walk_all", is_flag=True, help="Walk current and archived flows: the one walk that finds flows gone."
)
@click.option("--since", help="Stop at flows created before this ISO 8601 time (an incremental sync).")
@click.option(
    "--details",
    type=click.IntRange(0, 1_000_000),
    default=0,
    show_default=True,
    help="Then fetch the page of up to N flows the index has no last name for, so search finds them by name.",
)
@click.option(
    "--gap-checks",
    type=click.IntRange(0, 100_000),
    default=GAP_CHECKS,
    show_default=True,
    help="Then fetch up to N flows whose webhook events seem to have missed a change, to flag or clear them.",
)
def sync_flows(archived: bool, walk_all: bool, since: str | None, details: int, gap_checks: int):
    """Walk the Flow Service's pages into the flow index; one sync at a time across instances."""
    if archived and walk_all:
        raise click.UsageError("use --archived or --all, not both")
    lists = ALL if walk_all else ARCHIVED if archived else CURRENT
    try:
        progress = _print_progress if sys.stdout.isatty() else None
        report = run_sync(lists, _since(since), progress=progress, details=details, gap_checks=gap_checks)
    except SyncLocked as locked:
        click.echo(str(locked))
        return
    except SyncStopped as stop:
        reason = _diagnosis(stop.error) if stop.error else stop.reason
        raise click.ClickException(
            f"flows sync stopped: {reason}; written before it stopped: {stop.report.progress()}"
        ) from None
    click.echo(report.summary())
    if report.gaps is not None:  # run_sync always checks gaps after a walk that finished
        click.echo(report.gaps.line())
    if notices := scan_after_sync():
        click.echo(notices)


def _print_progress(report: SyncReport) -> None:
    if report.pages % PROGRESS_EVERY == 0:
        click.echo(f"so far: {report.progress()}")


# -- retention ---------------------------------------------------------------------------------


@contextmanager
def _retention_errors():
    try:
        yield
    except RetentionLocked as locked:
        click.echo(str(locked))  # another instance is doing the work: not a failure
    except LeaseLost:
        raise click.ClickException("retention stopped: another run took the lock over (this one stalled)") from None


@retention.command("apply")
def apply_retention_settings():
    """Remove each kind of record older than its setting; one run at a time across instances (cron-safe)."""
    with _retention_errors():
        for removed in apply_retention(_settings()).values():
            click.echo(removed.line())


def _subject(national_id: str, country: str | None) -> SubjectRecords:
    readings = [number.country for number in national_id_readings(national_id)]
    if country is None and len(readings) > 1:
        raise click.BadParameter(
            f"valid in more than one country ({', '.join(readings)}), each a different person: add --country",
            param_hint="NATIONAL_ID",
        )
    if country is not None and readings and country not in readings:
        raise click.BadParameter(
            f"a valid national id of {', '.join(readings)}, not of {country}", param_hint="NATIONAL_ID"
        )
    found = find_subject(national_id, country)
    if found is None:
        raise click.BadParameter("not a valid Norwegian, Swedish or Finnish national id", param_hint="NATIONAL_ID")
    return found


COUNTRY_OPTION = click.option(
    "--country", type=click.Choice(["no", "se", "fi"]), help="The person's country, for a number valid in two."
)


@subjects.command("export")
@click.argument("national_id")
@COUNTRY_OPTION
def export_subject(national_id: str, country: str | None):
    """Every stored record about the person with NATIONAL_ID, as one JSON document on stdout (access request)."""
    found = _subject(national_id, country)
    record_audit(_actor(), "subject_export", f"subject {found.subject_key[:12]}")
    click.echo(json.dumps(export_document(found), ensure_ascii=False, indent=2))


@subjects.command("erase")
@click.argument("national_id")
@COUNTRY_OPTION
@click.option("--yes", is_flag=True, help="Erase without asking.")
def erase_subject(national_id: str, country: str | None, yes: bool):
    """Erase the stored records about the person with NATIONAL_ID, except what PORTAL_LEGAL_HOLD keeps."""
    found = _subject(national_id, country)
    held = _settings().legal_hold
    counts = ", ".join(
        f"{kind} {count}" + (" (kept: legal hold)" if kind in held else "") for kind, count in found.counts().items()
    )
    if not yes:
        click.confirm(f"Erase this person's records: {counts}?", abort=True)
    removed = erase(found, held, _actor())
    for kind, count in removed.items():
        click.echo(f"{kind}: removed {count}" + (" (kept: legal hold)" if kind in held else ""))
    if removed.get("flows") and "flows" not in held:
        click.echo(f"note: {SERVICE_KEEPS_FLOWS}")


def init_app(app: Flask) -> None:
    for command in (users, audit, keys, events, flows, retention, subjects, check, notifications):
        app.cli.add_command(_database_trouble_in_one_line(command))


WRAPPED = "_portal_trouble_in_one_line"


def _database_trouble_in_one_line(command: click.Command) -> click.Command:
    """A command (or every command of a group) that meets a database it cannot use says so in one line and exits
    1, as cron and a container's logs want it, instead of a driver's traceback.

    Once per command: the groups are the module's, and every app made in a process (the tests make thousands)
    wrapped them again, until a command went through a thousand wrappers and out of Python's recursion limit."""
    if getattr(command, WRAPPED, False):
        return command
    setattr(command, WRAPPED, True)
    invoke = command.invoke

    def invoke_saying_what_is_wrong(ctx: click.Context):
        try:
            return invoke(ctx)
        except (DBAPIError, DatabaseUnavailable) as error:
            raise click.ClickException(_database_trouble(error)) from None
        except ThrottleUnavailable:
            raise click.ClickException(
                "the sign-in throttling store (PORTAL_REDIS_URL) cannot be reached: nothing was changed there"
            ) from None

    command.invoke = invoke_saying_what_is_wrong  # type: ignore[method-assign]
    return command


def _database_trouble(error: Exception) -> str:
    said = str(getattr(error, "orig", None) or error).splitlines()[0] if str(error) else type(error).__name__
    if _MISSING_TABLE.search(said):
        return f"the database has no portal tables yet ({said}): run `flask --app portal db upgrade` first"
    return f"the database cannot be used: {mask_text(said)}"


_MISSING_TABLE = re.compile(r"no such table|relation .* does not exist|UndefinedTable", re.IGNORECASE)
