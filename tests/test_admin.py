"""Admins manage staff accounts on the web, under the same rules as the command line."""

import logging
import re
import time

import pytest
from support import PASSWORD, add_user, deliver_signed, sign_in

from portal.extensions import db
from portal.models import AuditEntry, User


@pytest.fixture
def admin(signed_in):
    return signed_in("admin")


def account(app, username):
    with app.app_context():
        user = db.session.query(User).filter_by(username=username).one_or_none()
        if user:
            db.session.expunge(user)
        return user


def new_user(admin, **changes):
    data = {"username": "kari", "role": "operator", "password": PASSWORD, "confirm": PASSWORD} | changes
    return admin.post("/admin/users", data=data)


def change(admin, user_id, **data):
    return admin.post(f"/admin/users/{user_id}", data={f"user-{user_id}-{key}": value for key, value in data.items()})


def sign_out_everywhere(admin, user_id):
    return admin.post(f"/admin/users/{user_id}/sign-out")


def account_changes(app) -> list[tuple]:
    """The audit log's account changes, oldest first: (who, what, target, address)."""
    with app.app_context():
        rows = db.session.query(AuditEntry).filter(AuditEntry.action.like("account.%")).order_by(AuditEntry.id)
        return [(row.username, row.action, row.target, row.source_ip) for row in rows]


def test_an_admin_adds_a_user_who_can_then_sign_in(app, admin):
    answer = new_user(admin)
    assert answer.status_code == 302 and answer.headers["Location"] == "/admin/users"
    assert "kari can now sign in" in admin.get("/admin/users").text
    assert account(app, "kari").role == "operator"
    assert sign_in(app.test_client(), "kari").status_code == 302


def test_a_username_is_one_in_any_letter_case(app, admin):
    """Staff type "Kari" for kari: the account signs in so, and a second "KARI" cannot be made beside it."""
    new_user(admin)
    again = new_user(admin, username="KARI")
    assert again.status_code == 400 and "A user named kari exists already." in again.text
    assert sign_in(app.test_client(), "Kari").status_code == 302
    assert sign_in(app.test_client(), "Kari", password="wrong-password-1").status_code == 200
    with app.app_context():
        entries = db.session.query(AuditEntry).filter_by(action="sign_in").all()
        assert [entry.username for entry in entries][-1] == "kari"  # recorded under the account's own name


def test_two_accounts_made_before_names_were_compared_so_need_their_exact_name(app):
    add_user(app, "ola")
    add_user(app, "OLA", password="another-password-2")
    assert sign_in(app.test_client(), "ola").status_code == 302
    assert sign_in(app.test_client(), "OLA", password="another-password-2").status_code == 302
    assert sign_in(app.test_client(), "Ola").status_code == 200  # which one is meant cannot be told


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"password": "short", "confirm": "short"}, "at least 10"),
        ({"password": "password123", "confirm": "password123"}, "too easy to guess"),
        ({"password": "qwertyuiop", "confirm": "qwertyuiop"}, "too easy to guess"),
        ({"password": "aaaaaaaaaa", "confirm": "aaaaaaaaaa"}, "too easy to guess"),
        ({"password": "kari123456", "confirm": "kari123456"}, "too easy to guess"),  # the username with digits
        ({"confirm": "something else"}, "The passwords differ"),
        ({"password": "Long-pass-" * 26, "confirm": "Long-pass-" * 26}, "at most 256 characters"),
        ({"username": "has space"}, "A username is 1–80 characters: letters a–z"),
        ({"username": "kåre"}, "(no å, ä, ö or spaces)"),
        ({"username": "admin-user"}, "exists already"),
        ({"role": "emperor"}, "Not a valid choice"),
    ],
)
def test_adding_a_user_explains_what_is_wrong(app, admin, changes, message):
    answer = new_user(admin, **changes)
    assert answer.status_code == 400
    assert message in answer.text
    assert "<title>Error: Users · Flow Portal</title>" in answer.text, "said first, as every form sent back does"
    assert 'value="kari"' in answer.text or changes.get("username")
    if "too easy to guess" in message:  # under Username it was, with the focus there (found by a new user)
        assert re.search(r'data-field-error="password">[^<]*too easy to guess', answer.text)
        assert 'id="username-error"' not in answer.text


@pytest.mark.parametrize("username", ["15108695088", "811218-9876", "kari.131052-308T"])
def test_a_username_cannot_be_a_national_id(app, admin, username):
    """A national id pasted into the username field made an account named by it: shown whole on every page that
    names staff and kept whole in the audit log, which masks ids everywhere else (an attack)."""
    answer = new_user(admin, username=username)
    assert answer.status_code == 400 and "A username cannot hold a national id." in answer.text
    assert account(app, username) is None
    assert not any(username in (target or "") for _who, _what, target, _address in account_changes(app))


def test_both_password_fields_cut_a_pasted_password_alike(admin):
    form = admin.get("/admin/users").text
    for name in ("password", "confirm"):
        field = re.search(rf'<input[^>]*name="{name}"[^>]*>', form)[0]
        assert 'maxlength="256"' in field, name


def test_roles_change_and_accounts_are_disabled_and_enabled(app, admin):
    new_user(admin)
    kari = account(app, "kari")
    assert change(admin, kari.id, role="viewer", save_role="Save role").status_code == 302
    assert account(app, "kari").role == "viewer"
    assert "kari now has the role viewer." in admin.get("/admin/users").text
    change(admin, kari.id, role="viewer", toggle="Disable")
    assert account(app, "kari").disabled is True
    said = "kari is disabled: they cannot sign in, and their sessions have ended."
    assert said in admin.get("/admin/users").text, "not only 'kari is saved' (found by a new user)"
    assert sign_in(app.test_client(), "kari").status_code == 200
    change(admin, kari.id, role="viewer", toggle="Enable")
    assert account(app, "kari").disabled is False
    assert "kari is enabled again and can sign in." in admin.get("/admin/users").text


def test_the_last_admin_stays_an_admin_and_nobody_disables_themselves(app, admin):
    me = account(app, "admin-user")
    change(admin, me.id, role="viewer", save_role="Save role")
    assert account(app, "admin-user").role == "admin"
    assert "last active admin" in admin.get("/admin/users").text
    change(admin, me.id, role="admin", toggle="Disable")
    assert account(app, "admin-user").disabled is False
    page = admin.get("/admin/users").text
    assert "You cannot disable your own account" in page


@pytest.mark.parametrize(
    "act",
    [
        pytest.param(lambda admin, user_id: change(admin, user_id, role="operator", toggle="Disable"), id="disable"),
        pytest.param(lambda admin, user_id: change(admin, user_id, role="viewer", save_role="Save"), id="role"),
        pytest.param(sign_out_everywhere, id="sign-out-everywhere"),
    ],
)
def test_a_changed_user_is_signed_out_at_the_next_request(app, admin, signed_in, act):
    operator = signed_in("operator")
    assert operator.get("/flows").status_code == 200
    assert act(admin, account(app, "operator-user").id).status_code == 302
    answer = operator.get("/flows")
    assert answer.status_code == 302 and answer.headers["Location"].startswith("/login")
    assert admin.get("/admin/users").status_code == 200  # the admin's own session goes on


def test_every_account_change_on_the_admin_pages_is_audited_and_logged(app, admin, caplog):
    caplog.set_level(logging.INFO, logger="portal.accounts")
    new_user(admin)
    kari = account(app, "kari").id
    change(admin, kari, role="viewer", save_role="Save role")
    change(admin, kari, role="viewer", save_role="Save role")  # the same role again: nothing changes
    change(admin, kari, role="viewer", toggle="Disable")
    change(admin, kari, role="viewer", toggle="Enable")
    sign_out_everywhere(admin, kari)
    assert account_changes(app) == [
        ("admin-user", "account.create", "kari (operator)", "127.0.0.1"),
        ("admin-user", "account.role", "kari: operator -> viewer", "127.0.0.1"),
        ("admin-user", "account.disable", "kari", "127.0.0.1"),
        ("admin-user", "account.enable", "kari", "127.0.0.1"),
        ("admin-user", "account.sign_out_everywhere", "kari", "127.0.0.1"),
    ]
    logged = [record.getMessage() for record in caplog.records if record.name == "portal.accounts"]
    assert logged[1] == "account change 'account.role' by 'admin-user': 'kari: operator -> viewer'"
    assert len(logged) == 5 and PASSWORD not in " ".join(logged)
    assert account(app, "kari").session_version == 4  # role, disable, sign-out; enabling starts nothing


def test_a_refused_change_is_neither_made_nor_audited(app, admin):
    me = account(app, "admin-user")
    change(admin, me.id, role="viewer", save_role="Save role")
    assert account(app, "admin-user").role == "admin"
    assert account(app, "admin-user").session_version == me.session_version
    assert account_changes(app) == []


def test_only_admins_manage_users(app, signed_in):
    operator = signed_in("operator")
    assert new_user(operator).status_code == 403
    assert change(operator, 1, role="admin", save_role="Save role").status_code == 403
    assert sign_out_everywhere(operator, 1).status_code == 403
    assert account(app, "kari") is None


def test_unknown_accounts_and_forged_changes(make_app, admin):
    assert change(admin, 99999, role="admin", save_role="x").status_code == 404
    assert admin.post("/admin/users/1", data={}).status_code == 400


def test_user_forms_need_csrf(make_app):
    app = make_app()  # CSRF on
    client = app.test_client()
    add_user(app, "boss", "admin")
    page = client.get("/login")
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.text)[1]
    client.post("/login", data={"username": "boss", "password": PASSWORD, "csrf_token": token})
    assert new_user(client).status_code == 400
    assert account(app, "kari") is None
    assert sign_out_everywhere(client, account(app, "boss").id).status_code == 400
    assert account_changes(app) == []


def test_the_refused_deliveries_page_filters_counts_and_samples_alike(signed_in):
    """The reason filter narrowed the counts but not the samples, and the diagnosis filter the samples but not the
    counts (found by a new user)."""
    admin = signed_in("admin")
    json_type = {"content-type": "application/json"}
    for _ in range(2):
        admin.post("/webhooks/flow", data=b"{}", headers=json_type)  # no signature headers
        signed = {"webhook-id": "msg_1", "webhook-timestamp": str(int(time.time())), "webhook-signature": "v1,AAAA"}
        admin.post("/webhooks/flow", data=b"{}", headers=json_type | signed)
    page = admin.get("/admin/rejected?kind=missing_header").text
    samples = page.split('data-testid="rejection-tallies"', 1)[1]
    assert "missing_header" in samples and "malformed_signature" not in samples.split("</table>", 1)[1]
    by_diagnosis = admin.get("/admin/rejected?diagnosis=missing_header").text
    assert 'data-testid="rejection-tallies"' not in by_diagnosis
    assert 'data-testid="counts-not-by-diagnosis"' in by_diagnosis


def test_a_phone_reads_each_account_s_role_and_each_audit_entry_s_target(app, admin):
    """At 390 px the role selector cut "operator (reads and creates flows)" to "operat", and the audit log showed
    no target at all (found by a new user): the table's selector names roles alone (the new account's form says
    what each may do), and the target stands under its action where its own column is hidden."""
    new_user(admin)
    users = admin.get("/admin/users").text
    table = users.split('class="table', 1)[1].split("</table>", 1)[0]
    assert ">operator (reads and creates flows)<" not in table and ">operator<" in table
    assert ">operator (reads and creates flows)<" in users.split("</table>", 1)[1], "the new account's form says it"
    audit = admin.get("/admin/audit").text
    assert re.search(r'data-testid="target-on-phone"><code class="small">kari', audit)


def test_each_account_s_buttons_name_the_account_for_a_screen_reader(app, admin):
    """An accessibility review: a screen reader listing buttons heard "Save role", "Save role", "Disable" with no
    account, beside "Sign out everywhere (kari)"."""
    new_user(admin)
    users = admin.get("/admin/users").text
    assert re.search(r'<input [^>]*aria-label="Save role \(kari\)"', users)
    assert re.search(r'<input [^>]*aria-label="Disable \(kari\)"', users)


def test_the_main_tables_are_named_for_a_screen_reader(app, admin):
    """An accessibility review: the flows, events, accounts and audit tables had no caption and no name."""
    new_user(admin)
    assert deliver_signed(app, {"type": "note", "data": {"flowId": "f-1"}}).status_code == 200
    for path, name in (
        ("/admin/users", "Staff accounts"),
        ("/admin/audit", "Audit log"),
        ("/events", "Webhook events"),
    ):
        assert re.search(rf'<table class="table [^"]*" aria-label="{name}"', admin.get(path).text), path


def test_a_stored_event_s_body_is_a_named_box_the_keyboard_can_scroll(app, admin):
    """An accessibility review: the body's box scrolls sideways on a phone, out of reach of a keyboard in browsers
    that do not make it focusable themselves."""
    assert deliver_signed(app, {"type": "note", "data": {"flowId": "f-1"}}).status_code == 200
    event = re.search(r'href="(/events/[0-9]+)"', admin.get("/events").text)[1]
    assert (
        '<pre class="bg-body-tertiary p-3 border rounded small" tabindex="0" aria-labelledby="event-body-heading">'
        in (admin.get(event).text)
    )
