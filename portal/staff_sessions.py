"""Staff sessions: Flask-Login, the sign-in gate in front of every page, optional OIDC single sign-on.

A session is a signed cookie; what makes it end on the server's word is the user's session version,
checked on every request: sign-out, a password or role change and disabling bump it, and every
cookie carrying the old version stops working, copies included. Each session also has an idle
timeout and an absolute lifetime, both measured from times the cookie carries.
"""

import hmac
import time
from collections.abc import Callable
from typing import Any

from authlib.integrations.flask_client import OAuth
from flask import Flask, current_app, flash, g, redirect, request, session, url_for
from flask_babel import lazy_gettext as _l
from flask_login import current_user, login_user
from flask_wtf.csrf import generate_csrf

from . import current, news
from .accounts import StaffMember, account_by_id, staff_member
from .database import DatabaseUnavailable, database_unavailable, is_unavailable, mark_unavailable
from .extensions import db, login_manager
from .flowlinks import back_to_this_page, return_address
from .models import User
from .settings import Settings

# Endpoints anyone may reach; every other page needs a signed-in user.
PUBLIC_ENDPOINTS = {
    "static",
    "auth.login",
    "auth.set_language",
    "auth.sso_start",
    "auth.sso_callback",
    "health.live",
    "health.ready",
    "health.metrics",  # guarded by address or bearer token instead
    "consent.complete",
    "webhooks.receive",
}


SEARCHED_PERSON = "searched_person"  # the last person searched by national id: keyed hash and masked id
# What a signed-in session keeps, dropped when it ends in any way (signed out, ended elsewhere, idle, expired): the
# last person searched too, for the next person at the browser.
SESSION_KEYS = ("_user_id", "_fresh", "_id", "sv", "since", "seen", "csrf_token", SEARCHED_PERSON)
# The sign-in page's own address carries the way back; gunicorn refuses a request line over 4,094 bytes (414).
LONGEST_WAY_BACK = 2000
SEEN_EVERY = 60  # seconds: the idle clock is written back at most this often, not on every request


def init_app(app: Flask, settings: Settings) -> None:
    app.extensions.setdefault(current.CLOCK, time.time)
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = _l("Please sign in to continue.")
    login_manager.login_message_category = "info"
    login_manager.session_protection = "strong"
    login_manager.user_loader(_load_user)
    login_manager.unauthorized_handler(_to_sign_in)
    app.before_request(_require_sign_in)
    if settings.staff_sso_enabled:
        assert settings.oidc_issuer is not None  # what staff_sso_enabled says
        oauth = OAuth(app)  # one registry per app: a module-level one would keep the first app's client
        app.extensions["staff_sso"] = oauth.register(
            "staff",
            client_id=settings.oidc_client_id,
            client_secret=settings.oidc_client_secret,
            server_metadata_url=settings.oidc_issuer.rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={"scope": "openid profile email"},
        )


def staff_sso():
    """The staff identity provider's client, or None when single sign-on is off."""
    return current_app.extensions.get("staff_sso")


def _now() -> int:
    return int(current.clock()())


def begin_session(user: User) -> None:
    """A fresh session for `user`: nothing from before sign-in carries over (CSRF token included)."""
    chosen = session.get("language")  # a choice made on the sign-in page, just now: it wins and is kept
    session.clear()
    if chosen and chosen != user.language:
        user.language = chosen
        db.session.commit()
    if chosen or user.language:
        session["language"] = chosen or user.language
    session.permanent = True  # the cookie outlives the browser window, up to the absolute lifetime
    login_user(user)
    now = _now()
    session.update(sv=user.session_version, since=now, seen=now)
    # The new CSRF token goes out in the sign-in answer's cookie: made on the first page instead, it would
    # change the session there, and every page until the browser kept the new cookie would re-sign it.
    g.pop("csrf_token", None)
    generate_csrf()


def end_session(user_id: int) -> None:
    """End every session of the account (this one included), commit, and forget this browser's."""
    user = account_by_id(user_id)
    if user is not None:
        user.end_sessions()
    db.session.commit()
    for key in (*SESSION_KEYS, "language"):  # the next person at this browser starts from their own language
        session.pop(key, None)


def typist_mark(user_id: int) -> str:
    """A keyed mark of an account, for a page or a cookie to say whose input it carries without naming the account."""
    key = current_app.secret_key
    return hmac.new(str(key).encode(), f"typed-by:{user_id}".encode(), "sha256").hexdigest()[:32]


def typed_by(user_id: int, mark: str | None) -> bool:
    """Whether input carrying `mark` may be offered back to the account: typed in its session, or by no one known."""
    return not mark or hmac.compare_digest(mark, typist_mark(user_id))


def _session_problem(user: StaffMember) -> str | None:
    """Why this request's session no longer holds for `user`, or None while it does."""
    settings = current.settings()
    now, since, seen = _now(), session.get("since"), session.get("seen")
    if session.get("sv") != user.session_version or not isinstance(since, int) or not isinstance(seen, int):
        return "ended"
    if now - since > settings.session_max_seconds:
        return "expired"
    if now - seen > settings.session_idle_seconds:
        return "idle"
    if now - seen >= SEEN_EVERY and not _in_background():
        session["seen"] = now
    return None


def _load_user(user_id: str) -> StaffMember | None:
    # Never raises: an error page renders the base template, which asks for the user again.
    if not user_id.isdigit() or database_unavailable():
        return None
    try:
        user = staff_member(int(user_id))
    except Exception as error:
        if not is_unavailable(error):
            raise
        mark_unavailable(error)
        return None
    if not (user and user.is_active):
        return None
    problem = _session_problem(user)
    if problem and _in_background():
        return None
    if problem:
        g.session_ended = problem
        for key in SESSION_KEYS:
            session.pop(key, None)
        return None
    return user


SESSION_ENDED = {
    "ended": _l("Your session was ended (signed out elsewhere, or your account changed). Sign in again."),
    "expired": _l("Your session reached its time limit. Sign in again."),
    "idle": _l("You were signed out after a time without activity. Sign in again."),
}


# Forms whose input outlives the session they were opened in: endpoint -> the answer to one sent signed out (a page,
# or None for the usual way to the sign-in page).
_KEEPS_INPUT: dict[str, Callable[[], Any]] = {}


def keep_input_when_signed_out(endpoint: str, answer: Callable[[], Any]) -> None:
    _KEEPS_INPUT[endpoint] = answer


def _require_sign_in():
    if request.endpoint in PUBLIC_ENDPOINTS or request.endpoint is None:
        return None
    if not current_user.is_authenticated:
        if database_unavailable():
            raise DatabaseUnavailable  # the 503 page, not a sign-in form that cannot work either
        if _in_background():
            return news.signed_out()
        keeping = _KEEPS_INPUT.get(request.endpoint) if request.method == "POST" else None
        if kept := keeping and keeping():
            return kept
        if ended := g.get("session_ended"):  # a form sent after a pause too: nothing was done, and this says why
            flash(str(SESSION_ENDED[ended]), "info")
            return redirect(_sign_in_url())
        return login_manager.unauthorized()
    return None


def _in_background() -> bool:
    return request.endpoint in news.BACKGROUND_ENDPOINTS


def _to_sign_in():
    """Flask-Login's answer to a signed-out request, with the page to come back to sealed where it must be."""
    flash(str(login_manager.login_message), login_manager.login_message_category)
    return redirect(_sign_in_url())


def _sign_in_url() -> str:
    # A form's address may be no page (POST /flows/<id>/refresh): signed in, the person goes back to a page, not a 405.
    back = return_address(request.full_path.rstrip("?")) if request.method in ("GET", "HEAD") else back_to_this_page()
    return url_for("auth.login", next=back if len(back) <= LONGEST_WAY_BACK else None)  # else to the flow list


def forget_user() -> None:
    """Show the rest of this request as signed out, so rendering a page never loads the user again."""
    g._login_user = login_manager.anonymous_user()  # where Flask-Login caches the request's user
