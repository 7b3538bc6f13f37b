"""Outgoing notices: queued once per happening and channel, signed per Standard Webhooks, retried with backoff,
e-mailed through a real SMTP server, visible to admins."""

import base64
import secrets
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from email import message_from_bytes, policy

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult
from sqlalchemy import func, select, update
from standardwebhooks import Webhook
from support import (
    PASSWORD,
    add_user,
    portal_config,
    production_settings,
    run_in_threads,
    signed_in_as,
)
from werkzeug.wrappers import Request, Response

from portal.extensions import db
from portal.flowindex.observations import LIST, Observation
from portal.flowindex.store import apply_observations
from portal.models import AuditEntry, FlowIncident, FlowRecord, Notification, NotificationAttempt
from portal.notify.dispatch import JITTER, backoff, send_due
from portal.settings import SettingsError, load_settings

FULL_ID = "15108695088"
MASKED_ID = "151086•••••"


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


class HookReceiver:
    """A webhook endpoint on 127.0.0.1 that verifies every delivery and answers the next status it is given."""

    def __init__(self, serve, secret: str):
        self.verifier = Webhook(secret)
        self.statuses: list[int] = []  # answers to give, in order; then 204
        self.deliveries: list[dict] = []
        self.unverified: list[str] = []
        self.lock = threading.Lock()
        self.url = serve(self.wsgi) + "/hooks"

    @Request.application
    def wsgi(self, request: Request) -> Response:
        body = request.get_data()
        try:
            message = self.verifier.verify(body, dict(request.headers))
        except Exception as error:  # recorded: every test asserts there were none
            self.unverified.append(repr(error))
            return Response(status=401)
        with self.lock:
            self.deliveries.append({"id": request.headers["webhook-id"], "message": message, "body": body})
            status = self.statuses.pop(0) if self.statuses else 204
        return Response(status=status)

    def wait_for(self, count: int, timeout: float = 10.0) -> list[dict]:
        deadline = time.monotonic() + timeout
        while len(self.deliveries) < count and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.deliveries


class Clock:
    """Time as the test says; starts at the real time so that receivers accept the signature's timestamp."""

    def __init__(self):
        self.now = datetime.now(timezone.utc).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def secret() -> str:
    return new_secret()


@pytest.fixture
def hooks(serve, secret) -> HookReceiver:
    receiver = HookReceiver(serve, secret)
    yield receiver
    assert receiver.unverified == [], "every delivery carries a valid Standard Webhooks signature"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_notifying_app(make_app, database_url, clock):
    """A portal on SQLite and on PostgreSQL with the given PORTAL_NOTIFY_*/SMTP settings and the test's clock."""
    apps = []

    def build(**settings):
        app = make_app(database=database_url, **({"WTF_CSRF_ENABLED": False} | settings))
        app.extensions["portal.notify"].clock = clock
        apps.append(app)
        return app

    yield build
    for app in apps:
        app.extensions["portal.notify"].close()


@pytest.fixture
def app(make_notifying_app, hooks, secret):
    """The portal every fixture here uses (users, clients): notices go to the test receiver."""
    return make_notifying_app(PORTAL_NOTIFY_URL=hooks.url, PORTAL_NOTIFY_SECRET=secret)


def add_incident(app, flow_id="flow-1", incident_id="inc-1", message="Webhook failed", reference=None, at=None):
    with app.app_context():
        if reference:
            db.session.add(FlowRecord(flow_id=flow_id, reference_id=reference, change_source="detail"))
        db.session.add(
            FlowIncident(
                flow_id=flow_id,
                incident_id=incident_id,
                task_type="send-initiate-webhook",
                task_category="incident",
                message=message,
                source="detail",
                first_seen_at=at or datetime.now(timezone.utc),
                last_seen_at=at or datetime.now(timezone.utc),
            )
        )
        db.session.commit()


def run_pass(app, stuck=True):
    """One pass as `notifications send` makes it: (notices queued, the send report)."""
    with app.app_context():
        return app.extensions["portal.notify"].run_once(stuck=stuck)


def notices(app) -> list[Notification]:
    with app.app_context():
        rows = list(db.session.scalars(select(Notification).order_by(Notification.id)))
        db.session.expunge_all()
        return rows


def attempts(app) -> list[NotificationAttempt]:
    with app.app_context():
        rows = list(db.session.scalars(select(NotificationAttempt).order_by(NotificationAttempt.id)))
        db.session.expunge_all()
        return rows


def admin_client(app):
    return signed_in_as(app, "notice-admin", "admin")


# -- queued once, signed, masked -----------------------------------------------------------------


def test_an_incident_is_told_once_signed_with_a_stable_id_and_the_national_id_masked(app, hooks):
    add_incident(app, message=f"Could not reach the lender for {FULL_ID}", reference=f"loan {FULL_ID}")
    queued, report = run_pass(app)
    assert (queued, report.sent) == (1, 1)
    assert run_pass(app)[0] == 0 and len(hooks.deliveries) == 1, "the same incident is told once"
    delivery = hooks.deliveries[0]
    message = delivery["message"]
    assert message["type"] == "portal.flow.incident" and delivery["id"] == message["id"]
    assert message["data"]["flowId"] == "flow-1"
    assert message["data"]["flowUrl"] == "http://127.0.0.1:5000/flows/flow-1"
    assert message["data"]["incident"]["taskType"] == "send-initiate-webhook"
    assert MASKED_ID in message["data"]["incident"]["message"] and MASKED_ID in message["data"]["referenceId"]
    assert FULL_ID not in delivery["body"].decode()
    [row] = notices(app)
    assert (row.channel, row.kind, row.status, row.attempts) == ("webhook", "incident", "sent", 1)
    assert row.dedupe_key == "incident:flow-1:inc-1" and FULL_ID not in row.subject + row.payload
    assert [(attempt.ok, attempt.detail) for attempt in attempts(app)] == [(True, "HTTP 204")]


def test_enqueue_writes_once_per_key_and_wakes_the_sender(app, hooks):
    from portal.notify import enqueue

    with app.app_context():
        data = {"flowId": "flow-9", "note": f"for {FULL_ID}"}
        assert enqueue("incident", "incident:flow-9:x", "flow-9", "Flow flow-9: an incident", data) == 1
        assert enqueue("incident", "incident:flow-9:x", "flow-9", "Flow flow-9: an incident", data) == 0
    deliveries = hooks.wait_for(1)
    assert len(deliveries) == 1 and deliveries[0]["message"]["data"]["note"] == f"for {MASKED_ID}"


def test_a_second_incident_on_the_same_flow_is_told_too(app, hooks):
    add_incident(app, incident_id="inc-1")
    run_pass(app)
    add_incident(app, incident_id="inc-2")
    assert run_pass(app)[0] == 1
    assert [delivery["message"]["data"]["incident"]["id"] for delivery in hooks.deliveries] == ["inc-1", "inc-2"]


def test_a_flood_of_incidents_on_one_flow_is_recorded_but_held_back_past_the_limit(app, hooks, clock):
    from portal.notify.triggers import INCIDENT_NOTICES_PER_FLOW as most

    for number in range(most + 3):
        add_incident(app, flow_id="flooded", incident_id=f"inc-{number:02d}")
    add_incident(app, flow_id="calm", incident_id="inc-calm")
    assert run_pass(app)[0] == most + 4, "every incident is recorded as told"
    assert run_pass(app)[0] == 0, "held back ones are not found again"
    told = sorted(
        (delivery["message"]["data"]["flowId"], delivery["message"]["data"]["incident"]["id"])
        for delivery in hooks.deliveries
    )
    assert told == [("calm", "inc-calm")] + [("flooded", f"inc-{number:02d}") for number in range(most)]
    assert sorted(row.status for row in notices(app)).count("held_back") == 3
    page = admin_client(app).get("/admin/notifications").text
    assert "held back" in page and f"More than {most} incidents on this flow within an hour" in page
    with app.app_context():  # the flood an hour and a minute ago (the receiver checks signatures by its own clock)
        earlier = clock() - timedelta(hours=1, minutes=1)
        db.session.execute(update(Notification).values(created_at=earlier))
        db.session.commit()
    add_incident(app, flow_id="flooded", incident_id="inc-later")
    assert run_pass(app)[0] == 1 and hooks.deliveries[-1]["message"]["data"]["incident"]["id"] == "inc-later"


def test_a_resolved_incident_is_not_told(app, hooks):
    add_incident(app)
    with app.app_context():
        db.session.execute(update(FlowIncident).values(resolved_at=datetime.now(timezone.utc)))
        db.session.commit()
    assert run_pass(app)[0] == 0 and hooks.deliveries == []


def stuck_flow(app, flow_id: str, updated_at: datetime) -> None:
    """The service lists the flow as changed last at `updated_at`, through the index's own write path."""
    seen = Observation(
        flow_id,
        LIST,
        seen_at=updated_at,
        state_at=updated_at,
        reference_id=f"ref-{flow_id}",
        consent_status="Unopened",
        lifecycle="active",
        archived=False,
        created_at=updated_at,
        updated_at=updated_at,
    )
    with app.app_context():
        apply_observations([seen], app.extensions["portal.settings"].index_key)


def test_a_stuck_flow_is_told_once_per_change(app, hooks, clock):
    stuck_flow(app, "slow-1", clock.now - timedelta(hours=50))
    stuck_flow(app, "fresh-1", clock.now - timedelta(hours=1))
    assert run_pass(app)[0] == 1
    assert run_pass(app)[0] == 0, "still stuck, unchanged: not told again"
    stuck_flow(app, "slow-1", clock.now - timedelta(hours=49))  # it changed, and has been stuck since
    assert run_pass(app)[0] == 1
    kinds = [(delivery["message"]["type"], delivery["message"]["data"]["flowId"]) for delivery in hooks.deliveries]
    assert kinds == [("portal.flow.stuck", "slow-1")] * 2
    first = hooks.deliveries[0]["message"]["data"]
    assert first["hoursWithoutChange"] == 50 and first["referenceId"] == "ref-slow-1"
    assert len({delivery["id"] for delivery in hooks.deliveries}) == 2


# -- retries ------------------------------------------------------------------------------------


def test_a_receiver_that_fails_twice_gets_three_attempts_at_growing_intervals(app, hooks, clock):
    hooks.statuses = [500, 503]
    add_incident(app)
    start = clock.now
    assert run_pass(app)[1].retrying == 1
    [row] = notices(app)
    first_wait = row.next_attempt_at - start
    assert timedelta(seconds=30) <= first_wait <= timedelta(seconds=30 * (1 + JITTER))
    clock.now = row.next_attempt_at - timedelta(seconds=1)
    assert run_pass(app)[1].summary() == "sent 0, to retry 0, failed 0", "not due yet"
    clock.now = row.next_attempt_at
    run_pass(app)
    [row] = notices(app)
    second_wait = row.next_attempt_at - clock.now
    assert timedelta(seconds=60) <= second_wait <= timedelta(seconds=60 * (1 + JITTER))
    clock.now = row.next_attempt_at
    assert run_pass(app)[1].sent == 1
    [row] = notices(app)
    assert (row.status, row.attempts, row.last_error, row.next_attempt_at) == ("sent", 3, None, None)
    assert row.sent_at == clock.now
    assert [(attempt.ok, attempt.detail) for attempt in attempts(app)] == [
        (False, "HTTP 500 INTERNAL SERVER ERROR"),
        (False, "HTTP 503 SERVICE UNAVAILABLE"),
        (True, "HTTP 204"),
    ]
    assert len({delivery["id"] for delivery in hooks.deliveries}) == 1, "every retry carries the same webhook-id"


def test_gone_gives_up_at_once(app, hooks):
    hooks.statuses = [410]
    add_incident(app)
    assert run_pass(app)[1].failed == 1
    [row] = notices(app)
    assert (row.status, row.attempts, row.next_attempt_at) == ("failed", 1, None)
    assert "410" in row.last_error


def test_backoff_doubles_and_is_capped(app):
    settings = app.extensions["portal.settings"]
    assert [backoff(settings, attempt, lambda: 0.0).total_seconds() for attempt in (1, 2, 3, 4)] == [30, 60, 120, 240]
    assert backoff(settings, 19, lambda: 1.0) == timedelta(hours=6)


@pytest.fixture
def quick_app(make_notifying_app, hooks, secret):
    """Retries a second apart, so every attempt's timestamp stays within the receiver's five minutes."""
    return make_notifying_app(
        PORTAL_NOTIFY_URL=hooks.url,
        PORTAL_NOTIFY_SECRET=secret,
        PORTAL_NOTIFY_MAX_ATTEMPTS="3",
        PORTAL_NOTIFY_BACKOFF_SECONDS="1",
    )


def test_after_the_last_attempt_a_notice_has_failed_and_an_admin_sees_it_and_retries_it(quick_app, hooks, clock):
    hooks.statuses = [500, 500, 500]
    add_incident(quick_app)
    for _ in range(3):
        run_pass(quick_app)
        clock.advance(seconds=5)
    [row] = notices(quick_app)
    assert (row.status, row.attempts, row.next_attempt_at) == ("failed", 3, None)
    admin = admin_client(quick_app)
    page = admin.get("/admin/notifications")
    assert page.status_code == 200
    assert "failed" in page.text and "Retry now" in page.text and page.text.count("HTTP 500") >= 3
    assert hooks.url not in page.text and quick_app.extensions["portal.settings"].notify_secret not in page.text
    answer = admin.post(f"/admin/notifications/{row.id}/retry")
    assert answer.status_code == 302 and answer.headers["Location"] == "/admin/notifications"
    deadline = time.monotonic() + 10
    while notices(quick_app)[0].status != "sent" and time.monotonic() < deadline:
        time.sleep(0.02)  # the background sender, woken by the retry
    assert notices(quick_app)[0].status == "sent" and notices(quick_app)[0].attempts == 4
    with quick_app.app_context():
        audited = db.session.scalars(select(AuditEntry.target).where(AuditEntry.action == "notification_retry"))
        assert list(audited) == [f"notification {row.id}"]


def test_only_a_failed_notice_can_be_retried(app, hooks):
    add_incident(app)
    run_pass(app)
    [row] = notices(app)
    admin = admin_client(app)
    admin.post(f"/admin/notifications/{row.id}/retry")
    assert "Only a failed notice" in admin.get("/admin/notifications").text
    assert notices(app)[0].status == "sent"


def test_workers_sending_at_once_deliver_each_notice_once(app, hooks, clock):
    for number in range(12):
        add_incident(app, flow_id=f"flow-{number}")
    with app.app_context():
        from portal.notify.triggers import scan

        assert scan(app.extensions["portal.settings"], clock()) == 12

    def work():
        with app.app_context():
            send_due(app.extensions["portal.settings"], clock)

    assert run_in_threads(work, 4) == []
    assert sorted(delivery["message"]["data"]["flowId"] for delivery in hooks.deliveries) == sorted(
        f"flow-{number}" for number in range(12)
    )
    assert len(attempts(app)) == 12 and {row.attempts for row in notices(app)} == {1}


# -- the background sender, the commands, the page ------------------------------------------------


def test_an_incident_the_service_reports_reaches_the_receiver_from_the_background(app, hooks, sandbox, clock):
    """End to end: the sandbox adds an incident, a staff member opens the flow, the sender tells the receiver."""
    clock.now = datetime.now(timezone.utc)
    flow_id = sandbox.create(webhookUrl="http://127.0.0.1:9/unreachable")["flowId"]
    deadline = time.monotonic() + 10
    while not sandbox.api("GET", f"/api/applications/{flow_id}").json()["flow"]["hasIncidents"]:
        assert time.monotonic() < deadline, "the sandbox raised no incident"
        time.sleep(0.05)
    admin = admin_client(app)  # its first request starts the sender, which then idles for a minute
    assert admin.get(f"/flows/{flow_id}").status_code == 200
    deliveries = hooks.wait_for(1)
    assert len(deliveries) == 1, "the index writer woke the sender when it recorded the incident"
    delivery = deliveries[0]
    assert delivery["message"]["type"] == "portal.flow.incident"
    assert delivery["message"]["data"]["flowId"] == flow_id
    assert delivery["message"]["data"]["incident"]["taskType"] == "send-initiate-webhook"


def test_the_send_command_and_flows_sync_queue_and_send(app, hooks, sandbox):
    add_incident(app)
    result = app.test_cli_runner().invoke(args=["notifications", "send"])
    assert result.exit_code == 0 and "notifications: queued 1; sent 1, to retry 0, failed 0" in result.output
    add_incident(app, incident_id="inc-2")
    result = app.test_cli_runner().invoke(args=["flows", "sync"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "notifications: queued 1; sent 1, to retry 0, failed 0"
    assert len(hooks.deliveries) == 2


def test_the_test_command_sends_a_test_notice(app, hooks):
    result = app.test_cli_runner().invoke(args=["notifications", "test"])
    assert result.exit_code == 0 and result.output == "webhook: sent\n"
    assert hooks.deliveries[0]["message"]["type"] == "portal.test"
    hooks.statuses = [500]
    result = app.test_cli_runner().invoke(args=["notifications", "test"])
    assert result.exit_code == 1 and "webhook: pending (HTTP 500 INTERNAL SERVER ERROR)" in result.output


def test_an_admin_sends_a_test_notice_from_the_page(app, hooks):
    admin = admin_client(app)
    page = admin.get("/admin/notifications")
    assert "Send a test notice" in page.text and "http://127.0.0.1:" in page.text
    assert app.extensions["portal.settings"].notify_secret not in page.text
    answer = admin.post("/admin/notifications/test")
    assert answer.headers["Location"] == "/admin/notifications"
    [delivery] = hooks.wait_for(1)
    assert delivery["message"]["type"] == "portal.test"
    with app.app_context():
        assert db.session.scalar(select(AuditEntry.target).where(AuditEntry.action == "notification_test")) == (
            "channels webhook"
        )


def test_the_page_is_for_admins_and_its_buttons_need_csrf(make_notifying_app, hooks, secret, signed_in):
    assert signed_in("operator").get("/admin/notifications").status_code == 403
    guarded = make_notifying_app(PORTAL_NOTIFY_URL=hooks.url, PORTAL_NOTIFY_SECRET=secret, WTF_CSRF_ENABLED=True)
    client = guarded.test_client()
    add_user(guarded, "csrf-admin", "admin")
    page = client.get("/login")
    token = page.text.split('name="csrf_token" type="hidden" value="')[1].split('"')[0]
    client.post("/login", data={"username": "csrf-admin", "password": PASSWORD, "csrf_token": token})
    assert client.post("/admin/notifications/test").status_code == 400
    assert hooks.deliveries == []


# -- nothing configured ----------------------------------------------------------------------------


def test_with_nothing_configured_nothing_is_queued_and_the_page_says_how_to_turn_it_on(make_app, database_url):
    plain = make_app(database=database_url, WTF_CSRF_ENABLED=False)
    add_incident(plain)
    assert run_pass(plain)[0] == 0 and notices(plain) == []
    result = plain.test_cli_runner().invoke(args=["notifications", "send"])
    assert "notifications are off" in result.output
    assert plain.test_cli_runner().invoke(args=["notifications", "test"]).exit_code == 1
    page = admin_client(plain).get("/admin/notifications")
    assert "Notifications are off" in page.text and "PORTAL_NOTIFY_URL" in page.text
    assert "Send a test notice" not in page.text


# -- e-mail ----------------------------------------------------------------------------------------


class Mailbox:
    """What a real SMTP server (aiosmtpd) on 127.0.0.1 received."""

    def __init__(self):
        self.messages = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(
            (envelope.mail_from, envelope.rcpt_tos, message_from_bytes(envelope.content, policy=policy.default))
        )
        return "250 OK"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


SMTP_USER, SMTP_PASSWORD = "portal", "smtp-password-0123456789"


LOGINS = []


def authenticate(server, session, envelope, mechanism, auth_data):
    """The test server's one account (plain text is fine on 127.0.0.1 in a test); successful logins noted."""
    good = auth_data.login == SMTP_USER.encode() and auth_data.password == SMTP_PASSWORD.encode()
    if good:
        LOGINS.append(auth_data.login.decode())
    return AuthResult(success=good, handled=False)  # not handled: the server answers 235 or 535 itself


@pytest.fixture
def mailbox():
    box = Mailbox()
    controller = Controller(box, hostname="127.0.0.1", port=free_port())
    controller.start()
    box.port = controller.port
    yield box
    controller.stop()


@pytest.fixture
def guarded_mailbox():
    """An SMTP server that offers a login without TLS."""
    box = Mailbox()
    controller = Controller(
        box,
        hostname="127.0.0.1",
        port=free_port(),
        authenticator=authenticate,
        auth_require_tls=False,
    )
    controller.start()
    box.port = controller.port
    yield box
    controller.stop()


def mail_settings(port: int, **extra) -> dict:
    return {
        "PORTAL_SMTP_HOST": "127.0.0.1",
        "PORTAL_SMTP_PORT": str(port),
        "PORTAL_SMTP_SECURITY": "none",
        "PORTAL_NOTIFY_EMAIL_FROM": "portal@lender.example",
        "PORTAL_NOTIFY_EMAIL_TO": "support@lender.example",
    } | extra


def test_the_portal_logs_in_when_a_user_is_set(make_notifying_app, guarded_mailbox):
    mail_app = make_notifying_app(
        **mail_settings(guarded_mailbox.port, PORTAL_SMTP_USER=SMTP_USER, PORTAL_SMTP_PASSWORD=SMTP_PASSWORD)
    )
    add_incident(mail_app)
    LOGINS.clear()
    assert run_pass(mail_app)[1].sent == 1 and len(guarded_mailbox.messages) == 1
    assert LOGINS == [SMTP_USER]


def test_a_refused_login_stops_the_retries_and_says_so_without_the_password(make_notifying_app, guarded_mailbox):
    mail_app = make_notifying_app(
        **mail_settings(guarded_mailbox.port, PORTAL_SMTP_USER=SMTP_USER, PORTAL_SMTP_PASSWORD="wrong-password-98765")
    )
    add_incident(mail_app)
    assert run_pass(mail_app)[1].failed == 1 and guarded_mailbox.messages == []
    [row] = notices(mail_app)
    assert row.status == "failed" and row.last_error.startswith("SMTP 535")
    assert "wrong-password-98765" not in row.last_error


def test_an_incident_is_e_mailed_with_the_id_masked_and_a_link(make_notifying_app, mailbox):
    mail_app = make_notifying_app(
        PORTAL_SMTP_HOST="127.0.0.1",
        PORTAL_SMTP_PORT=str(mailbox.port),
        PORTAL_SMTP_SECURITY="none",
        PORTAL_NOTIFY_EMAIL_FROM="portal@lender.example",
        PORTAL_NOTIFY_EMAIL_TO="support@lender.example,ops@lender.example",
    )
    add_incident(mail_app, message=f"Could not reach the lender for {FULL_ID}", reference=f"loan {FULL_ID}")
    assert run_pass(mail_app)[1].sent == 1
    [(sender, recipients, mail)] = mailbox.messages
    assert sender == "portal@lender.example" and recipients == ["support@lender.example", "ops@lender.example"]
    body = mail.get_content()
    assert mail["Subject"] == f"Flow loan {MASKED_ID}: send-initiate-webhook / incident"
    assert MASKED_ID in body and "Open the flow: http://127.0.0.1:5000/flows/flow-1" in body
    assert FULL_ID not in mail.as_string()
    [attempt] = attempts(mail_app)
    assert attempt.ok and attempt.detail == "accepted by 127.0.0.1"


def test_an_smtp_server_that_is_not_there_is_retried(make_notifying_app):
    mail_app = make_notifying_app(
        PORTAL_SMTP_HOST="127.0.0.1",
        PORTAL_SMTP_PORT=str(free_port()),
        PORTAL_SMTP_SECURITY="none",
        PORTAL_NOTIFY_EMAIL_FROM="portal@lender.example",
        PORTAL_NOTIFY_EMAIL_TO="support@lender.example",
    )
    add_incident(mail_app)
    assert run_pass(mail_app)[1].retrying == 1
    assert [(attempt.ok, attempt.detail) for attempt in attempts(mail_app)] == [(False, "connection refused")]


def test_both_channels_get_their_own_row(make_notifying_app, hooks, secret, mailbox):
    both = make_notifying_app(
        PORTAL_NOTIFY_URL=hooks.url,
        PORTAL_NOTIFY_SECRET=secret,
        PORTAL_SMTP_HOST="127.0.0.1",
        PORTAL_SMTP_PORT=str(mailbox.port),
        PORTAL_SMTP_SECURITY="none",
        PORTAL_NOTIFY_EMAIL_FROM="portal@lender.example",
        PORTAL_NOTIFY_EMAIL_TO="support@lender.example",
    )
    add_incident(both)
    assert run_pass(both)[1].sent == 2
    assert sorted(row.channel for row in notices(both)) == ["email", "webhook"]
    assert len(hooks.deliveries) == 1 and len(mailbox.messages) == 1
    with both.app_context():
        assert db.session.scalar(select(func.count(Notification.id))) == 2


# -- production ------------------------------------------------------------------------------------


def production(**overrides) -> dict:
    return portal_config("http://127.0.0.1:9", "sqlite://", **production_settings(**overrides)) | {"TESTING": False}


@pytest.mark.parametrize(
    ("secret", "reason"),
    [
        ("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "published secret"),
        ("whsec_" + base64.b64encode(b"short").decode(), "shorter than 24 random bytes"),
        ("whsec_" + base64.b64encode(bytes(range(40))).decode(), "shorter than 24 random bytes"),
    ],
    ids=["the specification's example", "five bytes", "a sequence"],
)
def test_production_refuses_a_published_or_weak_notify_secret(secret, reason):
    with pytest.raises(SettingsError) as refused:
        load_settings(production(PORTAL_NOTIFY_URL="https://hooks.lender.example/portal", PORTAL_NOTIFY_SECRET=secret))
    assert "PORTAL_NOTIFY_SECRET" in str(refused.value) and reason in str(refused.value)
    assert secret not in str(refused.value)


def test_production_accepts_a_fresh_notify_secret():
    settings = production(PORTAL_NOTIFY_URL="https://hooks.lender.example/portal", PORTAL_NOTIFY_SECRET=new_secret())
    assert load_settings(settings).notify_url == "https://hooks.lender.example/portal"
