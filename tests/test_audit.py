"""The audit log: the last-admin rule under concurrent changes, the page's filters and paging, exports."""

import csv
import html
import io
import json
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import event, text
from support import add_user, sign_in, spreadsheet_rows

from portal.accounts import AccountError, change_role
from portal.audit import EXPORT_COLUMNS
from portal.extensions import db
from portal.models import AuditEntry, User

DEADLINE = 10.0  # seconds: the longest any wait here may take before the test fails
DAY = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)  # noon UTC: the same day in Europe/Oslo
ROW = re.compile(r'<td data-username="([^"]*)" data-action="([^"]*)" data-target="([^"]*)">')


def eventually(condition) -> bool:
    """Poll `condition` until it holds or DEADLINE passes; whether it held."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def add_admins(app, *names) -> list[int]:
    for name in names:
        add_user(app, name, "admin")
    with app.app_context():
        return [db.session.query(User).filter_by(username=name).one().id for name in names]


def active_admins(app) -> list[str]:
    with app.app_context():
        query = db.session.query(User.username).filter(User.role == "admin", User.disabled.is_(False))
        return sorted(name for (name,) in query)


def role_changes(app) -> list[str]:
    with app.app_context():
        return [row.target for row in db.session.query(AuditEntry).filter_by(action="account.role")]


def demote(app, user_id: int, actor: str, *, ready=None, listeners=()) -> None:
    """Demote `user_id` to viewer in a session of this thread's own, as `actor`.

    `ready`: a barrier or event to wait on once the user is read; `listeners`: (event, function) pairs
    on this session, to watch or hold it at one step of the change.
    """
    with app.app_context():
        user = db.session.get(User, user_id)
        for name, function in listeners:
            event.listen(db.session(), name, function)
        if ready:
            ready.wait(DEADLINE)
        change_role(user, "viewer", actor=actor)


def outcomes(*futures) -> list[str]:
    return sorted(type(future.exception(DEADLINE)).__name__ for future in futures)


def test_two_admins_demoting_each_other_at_once_leave_one_admin(database_url, make_app):
    app = make_app(database_url)
    anna, bo = add_admins(app, "anna", "bo")
    barrier = threading.Barrier(2)
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(demote, app, bo, "anna", ready=barrier)
        second = pool.submit(demote, app, anna, "bo", ready=barrier)
    assert outcomes(first, second) == ["AccountError", "NoneType"]
    assert len(active_admins(app)) == 1
    assert len(role_changes(app)) == 1


def _waiting_on_a_lock(app) -> bool:
    """Whether another PostgreSQL session of this database waits for a lock (never, on SQLite)."""
    if db.engine.dialect.name != "postgresql":
        return False
    with db.engine.connect() as connection:
        waiting = connection.scalar(
            text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
            )
        )
    return bool(waiting)


def test_a_demotion_waits_for_one_under_way_and_is_then_refused(database_url, make_app):
    """The first change holds its commit until the second has read the admins and is blocked (PostgreSQL:
    on the row lock) or about to write (SQLite: at its flush): the second must still see the first."""
    app = make_app(database_url)
    anna, bo = add_admins(app, "anna", "bo")
    first_checked, second_writing, held = threading.Event(), threading.Event(), []

    def hold_the_commit(_session):
        first_checked.set()
        held.append(eventually(lambda: second_writing.is_set() or _waiting_on_a_lock(app)))

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(demote, app, bo, "anna", listeners=[("before_commit", hold_the_commit)])
        second = pool.submit(
            demote, app, anna, "bo", ready=first_checked, listeners=[("before_flush", lambda *_: second_writing.set())]
        )
    assert first.exception(DEADLINE) is None
    assert isinstance(second.exception(DEADLINE), AccountError)
    assert held == [True]  # the second change really was under way while the first was uncommitted
    assert active_admins(app) == ["anna"]
    assert role_changes(app) == ["bo: admin -> viewer"]


# -- the page ----------------------------------------------------------------------------------


@pytest.fixture
def store_app(database_url, make_app):
    return make_app(database_url, WTF_CSRF_ENABLED=False)


def admin_client(app):
    add_admins(app, "boss")
    client = app.test_client()
    assert sign_in(client, "boss").status_code == 302
    return client


def seed(app, *entries) -> None:
    """Audit entries (days after DAY, who, what, target), as if written on those days."""
    with app.app_context():
        db.session.add_all(
            AuditEntry(at=DAY + timedelta(days=days), username=who, action=what, target=target, source_ip="192.0.2.7")
            for days, who, what, target in entries
        )
        db.session.commit()


def listed(page) -> list[tuple[str, str, str]]:
    return [tuple(html.unescape(value) for value in row) for row in ROW.findall(page.text)]


ENTRIES = (
    (0, "anna", "reveal_national_id", "flow-1"),
    (1, "bo", "account.role", "Kari: viewer -> admin"),
    (2, "anna", "account.disable", "kari"),
    (3, "anna", "export_flows", "status=signed 50%_off"),
)


@pytest.mark.parametrize(
    ("query", "targets"),
    [
        ("user=anna", ["status=signed 50%_off", "kari", "flow-1"]),
        ("action=account.role", ["Kari: viewer -> admin"]),
        ("target=KARI", ["kari", "Kari: viewer -> admin"]),
        ("target=%25_", ["status=signed 50%_off"]),  # LIKE's wildcards are matched as themselves
        ("from=2026-03-02&to=2026-03-03", ["kari", "Kari: viewer -> admin"]),
        ("user=anna&target=kari&to=2026-03-03", ["kari"]),
        ("user=nobody", []),
    ],
)
def test_the_audit_log_filters(store_app, query, targets):
    admin = admin_client(store_app)
    seed(store_app, *ENTRIES)
    page = admin.get(f"/admin/audit?{query}")
    assert page.status_code == 200
    assert [target for _, _, target in listed(page)] == targets
    assert ("No entries match these filters." in page.text) == (not targets)


def test_a_whole_national_id_as_the_target_leads_to_the_access_log(store_app):
    """Typed whole, a person's id matched no entry (they keep it masked) and the page said only "No entries match
    these filters" (a new user's walk): it says why, and where who looked at the person's data is."""
    admin = admin_client(store_app)
    seed(store_app, (0, "anna", "search_national_id", "national id 151086-•••••"))
    page = admin.get("/admin/audit", query_string={"target": "15108695088"}, follow_redirects=True)
    assert listed(page) == [] and 'data-testid="target-is-an-id"' in page.text
    assert 'href="/admin/access"' in page.text and "15108695088" not in page.text
    masked = admin.get("/admin/audit", query_string={"target": "151086-•••••"}).text  # the form entries keep
    assert len(ROW.findall(masked)) == 1 and 'data-testid="target-is-an-id"' not in masked


def test_who_finds_an_account_s_entries_in_any_letter_case(store_app):
    admin = admin_client(store_app)
    add_user(store_app, "anna")
    seed(store_app, *ENTRIES)
    for typed in ("ANNA", "Anna", " anna "):
        page = admin.get("/admin/audit", query_string={"user": typed})
        assert [target for _, _, target in listed(page)] == ["status=signed 50%_off", "kari", "flow-1"], typed
    assert listed(admin.get("/admin/audit?user=ann")) == [], "a whole name, not a part of one"


def test_the_action_filter_offers_the_actions_in_the_log(app):
    admin = admin_client(app)
    seed(app, *ENTRIES)
    select = re.search(r'<select[^>]*name="action".*?</select>', admin.get("/admin/audit").text, re.S)[0]
    offered = re.findall(r'<option (?:selected )?value="([^"]*)"', select)
    assert offered[0] == "" and offered[1:] == sorted(offered[1:])  # "any", then the actions by name
    assert {what for _, _, what, _ in ENTRIES} <= set(offered)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("from=2026-13-40", "Not a valid date value."),
        ("to=yesterday", "Not a valid date value."),
        ("from=2026-03-05&to=2026-03-01", "The end of the date range is before its start."),
        ("from=0001-01-01", "Use a date between the years"),
        ("action=no.such.action", "Not a valid choice"),
        ("user=%00", "Remove the invisible control characters"),
    ],
)
def test_a_bad_filter_is_explained_not_a_500(app, query, message):
    admin = admin_client(app)
    seed(app, *ENTRIES)
    for path in ("/admin/audit", "/admin/audit/export.csv"):
        page = admin.get(f"{path}?{query}")
        assert page.status_code == 400
        assert message in html.unescape(page.text)
        assert listed(page) == []


def test_pages_of_a_filtered_log_keep_the_filters(app):
    admin = admin_client(app)
    seed(app, *((0, "anna" if number % 4 else "bo", "reveal_national_id", f"flow-{number}") for number in range(160)))
    url, seen = "/admin/audit?user=anna&action=reveal_national_id", []
    while url:
        page = admin.get(url)
        rows = listed(page)
        assert {who for who, _, _ in rows} == {"anna"} and len(rows) <= 50
        seen += [target for _, _, target in rows]
        older = re.search(r'rel="next" href="([^"]+)"', page.text)
        url = html.unescape(older[1]) if older else None
        assert not url or ("user=anna" in url and "action=reveal_national_id" in url)
    assert seen == [f"flow-{number}" for number in reversed(range(160)) if number % 4]


# -- exports -----------------------------------------------------------------------------------


def parsed(fmt: str, body: str, downloaded: bool = True) -> list[dict]:
    """A page's download (CSV for spreadsheets) or a command's output (plain CSV, for scripts)."""
    if fmt == "csv":
        return spreadsheet_rows(body) if downloaded else list(csv.DictReader(io.StringIO(body)))
    return [json.loads(line) for line in body.splitlines()]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_page_exports_the_filtered_log_oldest_first(store_app, fmt):
    admin = admin_client(store_app)
    seed(store_app, *ENTRIES)
    answer = admin.get(f"/admin/audit/export.{fmt}?user=anna&from=2026-03-02")
    assert answer.status_code == 200
    assert answer.headers["Content-Disposition"].startswith('attachment; filename="audit-')
    rows = parsed(fmt, answer.text)
    assert [row["target"] for row in rows] == ["kari", "status=signed 50%_off"]
    assert set(rows[0]) == set(EXPORT_COLUMNS)
    assert rows[0].pop("purpose") in ("", None), "only a reveal states a purpose"
    assert rows[0] | {"at": datetime.fromisoformat(rows[0]["at"])} == {
        "at": DAY + timedelta(days=2),
        "username": "anna",
        "action": "account.disable",
        "target": "kari",
        "source_ip": "192.0.2.7",
    }
    exports = listed(admin.get("/admin/audit?action=export_audit"))
    assert exports == [("boss", "export_audit", "user=anna&from=2026-03-02")]


def test_the_export_link_carries_the_filters(app):
    admin = admin_client(app)
    page = admin.get("/admin/audit?user=anna&target=kari").text
    assert 'href="/admin/audit/export.jsonl?user=anna&amp;target=kari"' in page
    assert 'href="/admin/audit/export.csv?user=anna&amp;target=kari"' in page


def invoke(app, *args):
    return app.test_cli_runner().invoke(args=["audit", "export", *args])


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_command_line_exports_a_time_range_in_batches(database_url, make_app, fmt):
    app = make_app(database_url)
    many = ((3, "bo", "reveal_national_id", f"flow-{number}") for number in range(1100))  # over two batches
    seed(app, *ENTRIES, *many, (4, "bo", "account.enable", "too late"))
    result = invoke(app, "--since", "2026-03-03", "--until", "2026-03-05T12:00:00+00:00", "--format", fmt)
    assert result.exit_code == 0, result.output
    rows = parsed(fmt, result.output, downloaded=False)
    assert [row["target"] for row in rows[:2]] == ["kari", "status=signed 50%_off"]
    assert len(rows) == 1102 and rows[-1]["target"] == "flow-1099"
    assert {row["source_ip"] for row in rows} == {"192.0.2.7"}
    every = invoke(app, "--since", "2026-03-01", "--format", fmt)
    assert len(parsed(fmt, every.output, downloaded=False)) == len(ENTRIES) + 1101


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "Invalid value for '--since': use an ISO 8601 date or time"),
        (["--since", "2026-03-01", "--until", "2026-02-30"], "Invalid value for '--until'"),
        ([], "Missing option '--since'"),
        (["--since", "2026-03-01", "--format", "xml"], "Invalid value for '--format'"),
    ],
)
def test_the_command_line_refuses_what_it_cannot_read(app, args, message):
    result = invoke(app, *args)
    assert result.exit_code == 2
    assert message in result.output
