"""Staff sessions: Flask-Login, the sign-in gate in front of every page, optional OIDC single sign-on."""

from authlib.integrations.flask_client import OAuth
from flask import Flask, request
from flask_login import current_user

from .extensions import db, login_manager
from .models import User
from .settings import Settings

# Endpoints anyone may reach; every other page needs a signed-in user.
PUBLIC_ENDPOINTS = {
    "static",
    "auth.login",
    "auth.sso_start",
    "auth.sso_callback",
    "health.live",
    "health.ready",
    "health.consent_complete",
    "webhooks.receive",
}

oauth = OAuth()


def init_app(app: Flask, settings: Settings) -> None:
    login_manager.init_app(app)
    login_manager.login_view = "auth.login"
    login_manager.login_message = "Please sign in to continue."
    login_manager.login_message_category = "info"
    login_manager.session_protection = "strong"
    login_manager.user_loader(_load_user)
    app.before_request(_require_sign_in)
    if settings.staff_sso_enabled:
        oauth.init_app(app)
        oauth.register(
            "staff",
            client_id=settings.oidc_client_id,
            client_secret=settings.oidc_client_secret,
            server_metadata_url=settings.oidc_issuer.rstrip("/") + "/.well-known/openid-configuration",
            client_kwargs={"scope": "openid profile email"},
        )


def _load_user(user_id: str) -> User | None:
    user = db.session.get(User, int(user_id)) if user_id.isdigit() else None
    return user if user and user.is_active else None


def _require_sign_in():
    if request.endpoint in PUBLIC_ENDPOINTS or request.endpoint is None:
        return None
    if not current_user.is_authenticated:
        return login_manager.unauthorized()
    return None
