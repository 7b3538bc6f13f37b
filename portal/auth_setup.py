"""Staff sessions: Flask-Login, the sign-in gate in front of every page, optional OIDC single sign-on."""

from authlib.integrations.flask_client import OAuth
from flask import Flask, current_app, g, request
from flask_babel import lazy_gettext as _l
from flask_login import current_user

from .database import DatabaseUnavailable, database_unavailable, is_unavailable, mark_unavailable
from .extensions import db, login_manager
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
    "health.consent_complete",
    "webhooks.receive",
}


def init_app(app: Flask, settings: Settings) -> None:
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = _l("Please sign in to continue.")
    login_manager.login_message_category = "info"
    login_manager.session_protection = "strong"
    login_manager.user_loader(_load_user)
    app.before_request(_require_sign_in)
    if settings.staff_sso_enabled:
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


def _load_user(user_id: str) -> User | None:
    # Never raises: an error page renders the base template, which asks for the user again.
    if not user_id.isdigit() or database_unavailable():
        return None
    try:
        user = db.session.get(User, int(user_id))
    except Exception as error:
        if not is_unavailable(error):
            raise
        mark_unavailable(error)
        return None
    return user if user and user.is_active else None


def _require_sign_in():
    if request.endpoint in PUBLIC_ENDPOINTS or request.endpoint is None:
        return None
    if not current_user.is_authenticated:
        if database_unavailable():
            raise DatabaseUnavailable  # the 503 page, not a sign-in form that cannot work either
        return login_manager.unauthorized()
    return None


def forget_user() -> None:
    """Show the rest of this request as signed out, so rendering a page never loads the user again."""
    g._login_user = login_manager.anonymous_user()  # where Flask-Login caches the request's user
