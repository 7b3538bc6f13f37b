"""Staff sign-in (local accounts, optional OIDC single sign-on) and sign-out."""

from urllib.parse import urlsplit

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_limiter.util import get_remote_address
from flask_login import current_user, login_user, logout_user
from sqlalchemy import select
from werkzeug.security import check_password_hash, generate_password_hash

from ..auth_setup import staff_sso
from ..extensions import db, limiter
from ..forms import ConfirmForm, LoginForm
from ..i18n import LANGUAGES
from ..models import User, utc_now

bp = Blueprint("auth", __name__)

# Failed sign-ins only: a person who types their password right is never held up.
FAILED_SIGN_IN_LIMITS = "5 per minute;20 per hour"


def _attempt_key() -> str:
    return f"{get_remote_address()}|{request.form.get('username', '').strip().lower()}"


def _failed(response) -> bool:
    return response.status_code != 302


def safe_next(target: str | None) -> str:
    """A local path to go on to after sign-in; anything pointing off-site becomes the flow list."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc:
            return target
    return url_for("flows.index")


def _start_session(user: User, target: str | None):
    user.last_login_at = utc_now()
    db.session.commit()
    session.permanent = True  # ends after PERMANENT_SESSION_LIFETIME, not only when the browser closes
    login_user(user)
    return redirect(safe_next(target))


# Hashing against a throwaway hash for unknown names keeps their answer as slow as a known name's.
_UNKNOWN_USER_HASH = generate_password_hash("no such user")


def _password_matches(user: User | None, password: str) -> bool:
    if user is None or not user.password_hash:
        check_password_hash(_UNKNOWN_USER_HASH, password)
        return False
    return user.check_password(password)


@bp.get("/")
def home():
    """The portal's front door is the flow list."""
    return redirect(url_for("flows.index"))


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(FAILED_SIGN_IN_LIMITS, key_func=_attempt_key, methods=["POST"], deduct_when=_failed)
@limiter.limit("100 per hour", methods=["POST"], deduct_when=_failed)
def login():
    """Sign in with a local account."""
    if current_user.is_authenticated:
        return redirect(safe_next(request.args.get("next")))
    form = LoginForm(next=request.args.get("next", ""))
    if form.validate_on_submit():
        user = db.session.scalar(select(User).where(User.username == form.username.data.strip()))
        if _password_matches(user, form.password.data) and user.is_active:
            return _start_session(user, form.next.data)
        current_app.logger.info("failed sign-in for a username from %s", get_remote_address())
        flash(_("Wrong username or password, or the account is disabled."), "danger")
    return render_template("auth/login.html", form=form)


@bp.post("/logout")
def logout():
    """Sign out (POST with CSRF, so no link or image can sign anyone out)."""
    if ConfirmForm().validate_on_submit():
        logout_user()
        flash(_("You are signed out."), "info")
    return redirect(url_for("auth.login"))


@bp.post("/language")
def set_language():
    """Remember the chosen language for this browser session and go back to the page."""
    language = request.form.get("language", "")
    if language in LANGUAGES:
        session["language"] = language
    return redirect(safe_next(request.form.get("next")))


@bp.get("/login/sso")
def sso_start():
    """Send the person to the staff identity provider."""
    return (staff_sso() or abort(404)).authorize_redirect(url_for("auth.sso_callback", _external=True))


@bp.get("/login/sso/callback")
def sso_callback():
    """Sign in the staff member the identity provider vouches for, if an account links to them."""
    client = staff_sso() or abort(404)
    try:
        claims = client.authorize_access_token().get("userinfo") or {}
    except Exception:  # authlib raises several error types for a failed or forged callback
        flash(_("Single sign-on failed. Try again or sign in with your portal account."), "danger")
        return redirect(url_for("auth.login"))
    user = db.session.scalar(select(User).where(User.sso_subject == str(claims.get("sub"))))
    if not (user and user.is_active):
        flash(_("Your single sign-on identity has no portal account. Ask an administrator."), "danger")
        return redirect(url_for("auth.login"))
    return _start_session(user, None)
