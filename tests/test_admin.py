"""Admins manage staff accounts on the web, under the same rules as the command line."""

import re

import pytest
from support import PASSWORD, sign_in

from portal.extensions import db
from portal.models import User


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


def test_an_admin_adds_a_user_who_can_then_sign_in(app, admin):
    answer = new_user(admin)
    assert answer.status_code == 302 and answer.headers["Location"] == "/admin/users"
    assert "kari can now sign in" in admin.get("/admin/users").text
    assert account(app, "kari").role == "operator"
    assert sign_in(app.test_client(), "kari").status_code == 302


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"password": "short", "confirm": "short"}, "at least 10"),
        ({"confirm": "something else"}, "The passwords differ"),
        ({"username": "has space"}, "A username is 1–80 letters"),
        ({"username": "admin-user"}, "exists already"),
        ({"role": "emperor"}, "Not a valid choice"),
    ],
)
def test_adding_a_user_explains_what_is_wrong(app, admin, changes, message):
    answer = new_user(admin, **changes)
    assert answer.status_code == 400
    assert message in answer.text
    assert 'value="kari"' in answer.text or changes.get("username")


def test_roles_change_and_accounts_are_disabled_and_enabled(app, admin):
    new_user(admin)
    kari = account(app, "kari")
    assert change(admin, kari.id, role="viewer", save_role="Save role").status_code == 302
    assert account(app, "kari").role == "viewer"
    change(admin, kari.id, role="viewer", toggle="Disable")
    assert account(app, "kari").disabled is True
    assert sign_in(app.test_client(), "kari").status_code == 200
    change(admin, kari.id, role="viewer", toggle="Enable")
    assert account(app, "kari").disabled is False


def test_the_last_admin_stays_an_admin_and_nobody_disables_themselves(app, admin):
    me = account(app, "admin-user")
    change(admin, me.id, role="viewer", save_role="Save role")
    assert account(app, "admin-user").role == "admin"
    assert "last active admin" in admin.get("/admin/users").text
    change(admin, me.id, role="admin", toggle="Disable")
    assert account(app, "admin-user").disabled is False
    page = admin.get("/admin/users").text
    assert "You cannot disable your own account" in page


def test_a_disabled_user_is_signed_out_at_the_next_request(app, admin, signed_in):
    operator = signed_in("operator")
    assert operator.get("/flows").status_code == 200
    change(admin, account(app, "operator-user").id, role="operator", toggle="Disable")
    assert operator.get("/flows").status_code == 302


def test_only_admins_manage_users(app, signed_in):
    operator = signed_in("operator")
    assert new_user(operator).status_code == 403
    assert change(operator, 1, role="admin", save_role="Save role").status_code == 403
    assert account(app, "kari") is None


def test_unknown_accounts_and_forged_changes(make_app, admin):
    assert change(admin, 99999, role="admin", save_role="x").status_code == 404
    assert admin.post("/admin/users/1", data={}).status_code == 400


def test_user_forms_need_csrf(make_app):
    app = make_app()  # CSRF on
    client = app.test_client()
    with app.app_context():
        user = User(username="boss", role="admin")
        user.set_password(PASSWORD)
        db.session.add(user)
        db.session.commit()
    page = client.get("/login")
    token = re.search(r'name="csrf_token"[^>]*value="([^"]+)"', page.text)[1]
    client.post("/login", data={"username": "boss", "password": PASSWORD, "csrf_token": token})
    assert new_user(client).status_code == 400
    assert account(app, "kari") is None
