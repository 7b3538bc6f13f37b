"""Staff sign-in (local accounts, optional OIDC single sign-on) and sign-out."""

from urllib.parse import parse_qsl, unquote_plus, urlsplit

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, session, url_for
from flask_babel import gettext as _
from flask_login import current_user, logout_user
from flask_wtf.csrf import CSRFError
from werkzeug.security import check_password_hash, generate_password_hash

from .. import current, metrics
from ..accounts import find_account, find_sso_account, record_sign_in, remember_language
from ..audit import record_audit
from ..errors import csrf_error_page, page_of_the_form
from ..flowlinks import SEALED, from_url_form, hidden_in_urls, is_local_path, sealed_address
from ..forms import ConfirmForm, KeptCreateInput, LoginForm
from ..i18n import LANGUAGES, language_changed
from ..models import User
from ..security import followed_from_another_site, lead_on_as_from_elsewhere
from ..staff_sessions import begin_session, end_session, staff_sso
from ..throttle import ThrottleUnavailable, client_address, count_sign_in_attempt, signed_in_well

bp = Blueprint("auth", __name__)


def safe_next(target: str | None) -> str:
    """A local path to go on to after sign-in; anything off-site or with control characters is the flow list.

    A sealed one (`flowlinks.return_address`: the path held a national id) is opened first. A national id in it
    whole (a crafted link) is sealed: the redirect's Location never holds one (an attack)."""
    if target and target.startswith(SEALED):
        target = from_url_form(target)
        target = sealed_address(target) if target is not None and target.startswith("/") else None
    elif target and is_local_path(target) and hidden_in_urls(unquote_plus(target)):
        target = sealed_address(target)
        if hidden_in_urls(unquote_plus(target)):  # one as a parameter's name, which no page takes: the path alone
            target = sealed_address(urlsplit(target).path)
    return target if target and is_local_path(target) else url_for("flows.index")


def _start_session(
    user: User, target: str | None, how: str, kept: KeptCreateInput | None = None, led_from_elsewhere: bool = False
):
    record_sign_in(user)
    begin_session(user)
    if led_from_elsewhere:  # the page `target` opens asks first, as it would have asked the link itself
        lead_on_as_from_elsewhere()
    record_audit(user.username, "sign_in", how)
    return _on_after_sign_in(target, kept)


def _on_after_sign_in(target: str | None, kept: KeptCreateInput | None = None):
    """The page a sign-in leads to: the New flow form with what was typed before, when it carries that; else `next`."""
    if kept is not None and safe_next(target) == url_for("flows.new"):
        from .flows import kept_create_form  # here: the flows views import this module's safe_next

        return kept_create_form(kept) or redirect(safe_next(target))
    return redirect(safe_next(target))


# Hashing against a throwaway hash for unknown names keeps their answer as slow as a known name's.
_UNKNOWN_USER_HASH = generate_password_hash("no such user")


def _password_matches(user: User | None, password: str) -> bool:
    if user is None or not user.password_hash:
        check_password_hash(_UNKNOWN_USER_HASH, password)
        return False
    return user.check_password(password)


def _refused(form: LoginForm, status: int, message: str, retry_after: int | None = None):
    flash(message, "danger")
    headers = {"Retry-After": str(retry_after)} if retry_after else {}
    return render_template("auth/login.html", form=form), status, headers


@bp.get("/")
def home():
    """The portal's front door is the flow list."""
    return redirect(url_for("flows.index"))


@bp.route("/login", methods=["GET", "POST"])
def login():
    """Sign in with a local account."""
    if current_user.is_authenticated:
        return redirect(safe_next(request.args.get("next")))
    form = LoginForm(next=request.args.get("next", ""), elsewhere="1" if _led_from_elsewhere() else "")
    if not form.validate_on_submit():
        return render_template("auth/login.html", form=form)
    username = form.username.data.strip()
    try:
        wait = count_sign_in_attempt(username)
    except ThrottleUnavailable:
        metrics.count_sign_in("unavailable")
        message = _("Sign-in is paused: the portal cannot reach its rate-limit store. Try again in a minute.")
        return _refused(form, 503, message, 60)
    if wait:  # not audited: an unlimited stream of refused attempts must not flood the audit log
        metrics.count_sign_in("throttled")
        message = _("Too many attempts. Wait %(seconds)d seconds and try again.", seconds=wait)
        return _refused(form, 429, message, wait)
    user = find_account(username)
    if _password_matches(user, form.password.data) and user is not None and user.is_active:
        signed_in_well(username)
        metrics.count_sign_in("success")
        return _start_session(user, form.next.data, "password", form.kept.form, form.elsewhere.data == "1")
    metrics.count_sign_in("failed")
    attempted = _attempted_account(username, user)
    record_audit(attempted, "sign_in_failed", "password")
    current_app.logger.info("failed sign-in for %r from %r", attempted, client_address())
    flash(_("Wrong username or password, or the account is disabled."), "danger")
    return render_template("auth/login.html", form=form)


def _led_from_elsewhere() -> bool:
    """Whether a link on another site led to this sign-in page: the browser says so, or the page's address does once
    the language was changed on it (the way back, the portal's own redirect, reads as same-origin). Anyone may add
    `elsewhere=1`: it only asks before an export or a search by national id."""
    return followed_from_another_site() or request.args.get("elsewhere") == "1"


def _attempted_account(typed: str, user: User | None) -> str:
    """Whose sign-in failed, as the audit log and the log keep it: an account's own name; of a name no account has,
    only its start and length, for it is as often a password typed in the wrong field, or a national id (an
    attack)."""
    if user is not None:
        return user.username
    return f"{typed[:2]}… (no such account, {len(typed)} characters)"


@bp.post("/logout")
def logout():
    """Sign out (POST with CSRF, so no link or image can sign anyone out), in every browser at once."""
    if ConfirmForm().validate_on_submit():
        if current_user.is_authenticated:
            record_audit(current_user.username, "sign_out", "every session", commit=False)
            end_session(current_user.id)  # commits the audit row with the session version
        logout_user()
        flash(_("You are signed out, in every browser."), "info")
    return redirect(url_for("auth.login"))


@bp.errorhandler(CSRFError)
def expired_form(error: CSRFError):
    """The language form of a page open too long: back to that page, asking for the choice again. A sign-in sent
    again once signed in (Reload on the page that sign-in answered with): where it led, not "session expired"."""
    if request.endpoint == "auth.login" and current_user.is_authenticated:
        form = LoginForm()
        kept = None if followed_from_another_site() else form.kept.form
        return _on_after_sign_in(form.next.data, kept)
    if request.endpoint == "auth.login":  # Try again: the sign-in page, still led to from another site
        page = page_of_the_form()
        return csrf_error_page(error, _carrying_the_mark(page) if page else None)
    if request.endpoint != "auth.set_language":
        return csrf_error_page(error)
    flash(_("The page was open too long to change its language: choose the language again."), "warning")
    return redirect(safe_next(request.form.get("next")))


@bp.post("/language")
def set_language():
    """Remember the chosen language (in the account when signed in) and go back to the page."""
    language = request.form.get("language", "")
    if language in LANGUAGES:
        session["language"] = language
        if current_user.is_authenticated:
            remember_language(current_user.id, language)
    return (
        _sign_in_still_carrying_input() or _new_flow_still_carrying_input() or redirect(_back_from_the_language_form())
    )


def _back_from_the_language_form() -> str:
    """The page the language form was on; a sign-in page a link on another site led to says so in its address."""
    return _carrying_the_mark(safe_next(request.form.get("next")))


def _carrying_the_mark(back: str) -> str:
    """`back`, and when it is the sign-in page a link on another site led to (the form sent says so), saying so."""
    parts = urlsplit(back)
    if request.form.get("elsewhere") != "1" or parts.path != url_for("auth.login"):
        return back
    if ("elsewhere", "1") in parse_qsl(parts.query):
        return back
    return f"{back}{'&' if parts.query else '?'}elsewhere=1"


def _sign_in_still_carrying_input():
    """The language chosen on a sign-in page that carries a New flow form's typed values: that page again, in the
    language chosen, still carrying them (the way back to it would find no one signed in and lose them)."""
    if current_user.is_authenticated or followed_from_another_site():
        return None
    form = LoginForm()
    if not form.kept.holds_input():
        return None
    form.next.data = url_for("flows.new")
    language_changed()
    return render_template("auth/login.html", form=form)


def _new_flow_still_carrying_input():
    """The language chosen on a New flow page with something typed in it (create-flow.js carries it in the language
    form): that form again in the language chosen, still holding it (the way back to /flows/new started it empty)."""
    if not current_user.is_authenticated:
        return None
    from .flows import kept_create_form  # here: the flows views import this module's safe_next

    language_changed()
    return kept_create_form(KeptCreateInput(request.form, prefix="kept-"), signed_in_again=False)


@bp.get("/login/sso")
def sso_start():
    """Send the person to the staff identity provider."""
    callback = current.settings().public_url + url_for("auth.sso_callback")
    return (staff_sso() or abort(404)).authorize_redirect(callback)  # never built from the Host header


@bp.get("/login/sso/callback")
def sso_callback():
    """Sign in the staff member the identity provider vouches for, if an account links to them."""
    client = staff_sso() or abort(404)
    try:
        claims = client.authorize_access_token().get("userinfo") or {}
    except Exception:  # authlib raises several error types for a failed or forged callback
        flash(_("Single sign-on failed. Try again or sign in with your portal account."), "danger")
        return redirect(url_for("auth.login"))
    subject = claims.get("sub")
    user = find_sso_account(subject) if isinstance(subject, str) and subject else None
    if not (user and user.is_active):
        record_audit("-", "sign_in_failed", "single sign-on")
        flash(_("Your single sign-on identity has no portal account. Ask an administrator."), "danger")
        return redirect(url_for("auth.login"))
    return _start_session(user, None, "single sign-on")
