"""Staff accounts: the rules that hold whether an admin uses the web pages or the command line."""

import re

from flask_babel import gettext as _
from sqlalchemy import func, select

from .extensions import db
from .models import ROLES, User

USERNAME = re.compile(r"[A-Za-z0-9._@-]{1,80}")
MIN_PASSWORD = 10


class AccountError(ValueError):
    """The change would break a rule; the message says which."""


def find_account(username: str) -> User | None:
    return db.session.scalar(select(User).where(User.username == username))


def create_account(username: str, role: str, password: str, sso_subject: str | None = None) -> User:
    if not USERNAME.fullmatch(username):
        raise AccountError(_("A username is 1–80 letters, digits or . _ @ -"))
    if role not in ROLES:
        raise AccountError(_("The role must be one of %(roles)s.", roles=", ".join(ROLES)))
    if len(password) < MIN_PASSWORD:
        raise AccountError(_("The password must be at least %(count)d characters.", count=MIN_PASSWORD))
    if find_account(username):
        raise AccountError(_("A user named %(name)s exists already.", name=username))
    user = User(username=username, role=role, sso_subject=sso_subject)
    user.set_password(password)
    db.session.add(user)
    db.session.commit()
    return user


def change_role(user: User, role: str) -> None:
    if role not in ROLES:
        raise AccountError(_("The role must be one of %(roles)s.", roles=", ".join(ROLES)))
    if role != "admin":
        _keep_an_admin(user)
    user.role = role
    db.session.commit()


def set_disabled(user: User, disabled: bool) -> None:
    if disabled:
        _keep_an_admin(user)
    user.disabled = disabled
    db.session.commit()


def _keep_an_admin(leaving: User) -> None:
    """Refuse to take away the last active admin: nobody could manage accounts any more."""
    if leaving.role != "admin" or leaving.disabled:
        return
    others = db.session.scalar(
        select(func.count())
        .select_from(User)
        .where(User.role == "admin", User.disabled.is_(False), User.id != leaving.id)
    )
    if not others:
        raise AccountError(_("%(name)s is the last active admin; make another admin first.", name=leaving.username))
