"""Flow Portal: the back-office portal for lenders that use the Flow Service."""

import sys
from collections.abc import Mapping
from datetime import timedelta

from dotenv import find_dotenv, load_dotenv
from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from . import auth_setup, cli, database, errors, i18n, presentation, security
from .extensions import csrf, db, limiter, migrate
from .flowapi import build_client
from .flowindex import feed as flow_index
from .settings import Settings, SettingsError, load_settings
from .views import admin, auth, events, flows, health
from .webhooks import receiver

# Flask keys a test or deployment may pass in `config` beside the DESIGN §2 settings.
FLASK_KEYS = ("TESTING", "WTF_CSRF_ENABLED", "SERVER_NAME", "RATELIMIT_ENABLED", "PREFERRED_URL_SCHEME")


def create_app(config: Mapping | None = None) -> Flask:
    """Build the portal. `config` replaces the environment (and `.env`) when given."""
    app = Flask(__name__, template_folder="../templates", static_folder="../static", instance_relative_config=True)
    settings = _load_settings(app, config)
    _configure(app, settings, config or {})
    _init_extensions(app, settings)
    _register_blueprints(app, settings)
    errors.init_app(app)
    security.init_app(app)
    cli.init_app(app)
    presentation.init_app(app)
    return app


def _load_settings(app: Flask, config: Mapping | None) -> Settings:
    if config is None:
        load_dotenv(find_dotenv(usecwd=True))  # the working directory's .env, never overriding the environment
    try:
        return load_settings(config, instance_path=app.instance_path, testing=bool(config and config.get("TESTING")))
    except SettingsError as error:
        print(f"portal: configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _configure(app: Flask, settings: Settings, overrides: Mapping) -> None:
    app.extensions["portal.settings"] = settings
    app.logger.setLevel(settings.log_level)  # the "portal" logger, parent of every module's logger
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SQLALCHEMY_DATABASE_URI=settings.database_url,
        SQLALCHEMY_ENGINE_OPTIONS=database.engine_options(settings),
        SESSION_COOKIE_NAME="flow_portal_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.public_url.startswith("https://"),
        REMEMBER_COOKIE_SECURE=settings.public_url.startswith("https://"),
        PERMANENT_SESSION_LIFETIME=timedelta(hours=10),
        MAX_CONTENT_LENGTH=max(settings.webhook_max_bytes, 1024 * 1024),
        RATELIMIT_STORAGE_URI=settings.redis_url or "memory://",
        RATELIMIT_HEADERS_ENABLED=False,
        RATELIMIT_SWALLOW_ERRORS=True,
        RATELIMIT_IN_MEMORY_FALLBACK_ENABLED=True,
    )
    app.config.update({key: overrides[key] for key in FLASK_KEYS if key in overrides})
    if settings.trusted_proxies:
        # Behind N reverse proxies: the client address (audit log, throttling) and https come from them.
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops)


def _init_extensions(app: Flask, settings: Settings) -> None:
    db.init_app(app)
    database.configure_engine(app)
    migrate.init_app(app, db, directory=str(database.MIGRATIONS))
    csrf.init_app(app)
    limiter.init_app(app)
    i18n.init_app(app)
    auth_setup.init_app(app, settings)
    app.extensions["flow_client"] = build_client(settings)
    flow_index.init_app(app)


def _register_blueprints(app: Flask, settings: Settings) -> None:
    for module in (health, auth, flows, events, admin):
        app.register_blueprint(module.bp)
    app.register_blueprint(receiver.make_blueprint(settings.webhook_path))
