"""Staff accounts: the rules that hold whether an admin uses the web pages or the command line.

Every change is saved in one transaction with its audit entry (never a change without its record), is
logged, and names its `actor`: the signed-in admin's username, or `cli:<user>` from the command line.
"""

import logging
import re
from dataclasses import dataclass

from flask_babel import gettext as _
from flask_login import UserMixin
from sqlalchemy import and_, bindparam, func, or_, select

from .audit import record_audit
from .extensions import db
from .masking import mask_text
from .models import ROLES, User, role_at_least, utc_now
from .throttle import unlock_account

USERNAME = re.compile(r"[A-Za-z0-9._@-]{1,80}")
MIN_PASSWORD = 10
MAX_PASSWORD = 256  # the forms' limit
# zxcvbn's score (0-4) a password needs: 2, "somewhat guessable", holds against guessing online, and sign-in is
# throttled; it refuses "password123", "1234567890", "qwertyuiop", "aaaaaaaaaa" and the username with digits.
MIN_PASSWORD_SCORE = 2
PASSWORD_CHECKED = 72  # zxcvbn's limit: the first 72 characters are judged (more are never weak for it)
ACTIVE_ADMIN = and_(User.role == "admin", User.disabled.is_(False))

log = logging.getLogger(__name__)


class AccountError(ValueError):
    """The change would break a rule; the message says which, and `field` which part of the account it is about."""

    def __init__(self, message: str, field: str = "username") -> None:
        super().__init__(message)
        self.field = field


def find_account(username: str) -> User | None:
    """The account named `username`: exactly, else in another letter case ("Alice" for alice) when one is."""
    exact = db.session.scalar(select(User).where(User.username == username))
    if exact is not None:
        return exact
    alike = _named_alike(username)
    return alike[0] if len(alike) == 1 else None  # two created before names were compared so: neither


def _named_alike(username: str) -> list[User]:
    """Accounts whose name is `username` in any letter case (names are ASCII: SQL's lower() folds them alike)."""
    return list(db.session.scalars(select(User).where(func.lower(User.username) == username.lower()).limit(2)))


def account_by_id(user_id: int) -> User | None:
    return db.session.get(User, user_id)


@dataclass(frozen=True, eq=False)
class StaffMember(UserMixin):
    """The signed-in person as every request sees them: read with one plain query, not loaded as an ORM entity
    (a third of the cost of finding who is signed in). A change to the account goes through `account_by_id`."""

    id: int
    username: str
    role: str
    disabled: bool
    session_version: int
    language: str | None

    @property
    def is_active(self) -> bool:
        return not self.disabled

    def can(self, role: str) -> bool:
        """True if this person's role is `role` or above it."""
        return role_at_least(self.role, role)


_MEMBER = select(User.id, User.username, User.role, User.disabled, User.session_version, User.language).where(
    User.id == bindparam("user_id")
)


def staff_member(user_id: int) -> StaffMember | None:
    """The account `user_id` as a signed-in request needs it, or None when there is none."""
    row = db.session.connection().execute(_MEMBER, {"user_id": user_id}).first()
    return StaffMember(*row) if row else None


def all_accounts() -> list[User]:
    """Every staff account, by username."""
    return list(db.session.scalars(select(User).order_by(User.username)))


def record_sign_in(user: User) -> None:
    """Remember when `user` last signed in (the users page and `users list` show it)."""
    user.last_login_at = utc_now()
    db.session.commit()


def find_sso_account(subject: str) -> User | None:
    """The account linked to a single sign-on subject (the identity provider's `sub`)."""
    return db.session.scalar(select(User).where(User.sso_subject == subject))


def create_account(
    username: str, role: str, password: str | None, sso_subject: str | None = None, *, actor: str
) -> User:
    """A new staff account; without a password it signs in by single sign-on only."""
    if not USERNAME.fullmatch(username):
        raise AccountError(_("A username is 1–80 characters: letters a–z, digits or . _ @ - (no å, ä, ö or spaces)"))
    if mask_text(username) != username:  # a username is shown whole on every page and in the audit log
        raise AccountError(_("A username cannot hold a national id."))
    _check_role(role)
    if password is None and not sso_subject:
        raise AccountError(_("An account needs a password or a single sign-on subject."))
    linked = find_sso_account(sso_subject) if sso_subject else None
    if linked is not None:
        raise AccountError(_("The account %(name)s is linked to that single sign-on subject.", name=linked.username))
    if password is not None:
        _check_password(password, username)
    taken = _named_alike(username)
    if taken:  # in any letter case: staff sign in as "Alice" or "alice" alike
        raise AccountError(_("A user named %(name)s exists already.", name=taken[0].username))
    user = User(username=username, role=role, sso_subject=sso_subject)
    if password is not None:
        user.set_password(password)
    db.session.add(user)
    _save(actor, "account.create", f"{username} ({role})")
    return user


def change_role(user: User, role: str, *, actor: str) -> None:
    """Give `user` another role; their sessions end, since what they may do has changed."""
    _check_role(role)
    admins = _lock(user)
    before = user.role
    if role == before:
        db.session.commit()  # nothing to change: end the transaction and its locks
        return
    user.role = role
    user.end_sessions()
    _keep_an_admin(admins, user)
    _save(actor, "account.role", f"{user.username}: {before} -> {role}")


def set_disabled(user: User, disabled: bool, *, actor: str) -> None:
    """Disable an account, ending its sessions, or enable it again."""
    admins = _lock(user)
    if user.disabled == disabled:
        db.session.commit()
        return
    user.disabled = disabled
    if disabled:
        user.end_sessions()
    _keep_an_admin(admins, user)
    _save(actor, "account.disable" if disabled else "account.enable", user.username)


def change_password(user: User, password: str, *, actor: str) -> None:
    """Give `user` a new password; the sessions the old one opened end."""
    _check_password(password, user.username)
    _lock(user)
    user.set_password(password)
    _save(actor, "account.password", user.username)


def sign_out_everywhere(user: User, *, actor: str) -> None:
    """End every session of `user`, in every browser, at its next request."""
    _lock(user)
    user.end_sessions()
    _save(actor, "account.sign_out_everywhere", user.username)


def unlock_sign_in(user: User, *, actor: str) -> None:
    """Clear the account's sign-in count (from every address together), spent by someone guessing."""
    unlock_account(user.username)
    _save(actor, "account.unlock", user.username)


def remember_language(user_id: int, language: str) -> None:
    """Keep the person's choice of language in their account, for every browser they sign in from."""
    user = account_by_id(user_id)
    if user is not None and user.language != language:
        user.language = language
        db.session.commit()


def _check_role(role: str) -> None:
    if role not in ROLES:
        raise AccountError(_("The role must be one of %(roles)s.", roles=", ".join(ROLES)), field="role")


def _check_password(password: str, username: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise AccountError(_("The password must be at least %(count)d characters.", count=MIN_PASSWORD), "password")
    # Imported here, when a password is set: its word lists cost every worker 13 MB of memory (measured), and a
    # worker that serves pages never sets one.
    from zxcvbn import zxcvbn

    if zxcvbn(password[:PASSWORD_CHECKED], user_inputs=[username])["score"] < MIN_PASSWORD_SCORE:
        raise AccountError(
            _(
                "This password is too easy to guess: a common password, a word with a few digits, a keyboard row, "
                "a repeat or the username. A few unrelated words make a good one."
            ),
            field="password",
        )


def _lock(user: User) -> int:
    """Lock and reload `user` and every active admin for this transaction; how many active admins there are.

    PostgreSQL locks the rows, in id order so that two changes never deadlock; a second change waits
    here for the first to commit, then reads what it wrote. SQLite ignores FOR UPDATE: its one write
    lock comes with the change's flush (see `_keep_an_admin`).
    """
    query = select(User).where(or_(User.id == user.id, ACTIVE_ADMIN)).order_by(User.id).with_for_update()
    rows = db.session.scalars(query.execution_options(populate_existing=True)).all()
    return sum(1 for row in rows if row.role == "admin" and not row.disabled)


def _keep_an_admin(admins_before: int, changed: User) -> None:
    """Refuse a change that leaves no active admin: nobody could manage accounts any more.

    Runs after the change, in its transaction. The flush writes the change (on SQLite that takes the
    write lock, held to the commit, and pysqlite begins the transaction only there, so the count below
    sees every change committed before); on PostgreSQL `_lock` holds every active admin's row. Either
    way no other change can take an admin away between this count and the commit.
    """
    name = changed.username
    db.session.flush()
    if admins_before and not db.session.scalar(select(func.count()).select_from(User).where(ACTIVE_ADMIN)):
        db.session.rollback()
        raise AccountError(_("%(name)s is the last active admin; make another admin first.", name=name))


def _save(actor: str, action: str, target: str) -> None:
    """Commit the change with its audit entry, then log it."""
    record_audit(actor, action, target, commit=False)
    db.session.commit()
    log.info("account change %r by %r: %r", action, actor, target)
