"""Flow Portal: the back-office portal for lenders that use the Flow Service."""

import os
import sys
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from dotenv import dotenv_values, find_dotenv
from flask import Flask
from flask.cli import NoAppException
from sqlalchemy.orm import configure_mappers
from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.routing import Map

from . import (
    cli,
    current,
    database,
    errors,
    i18n,
    logs,
    notify,
    presentation,
    security,
    staff_sessions,
    template_cache,
    throttle,
    widgets,
)
from .extensions import csrf, db, migrate
from .flowapi import build_client
from .flowindex import feed as flow_index
from .flowlinks import FlowIdConverter
from .settings import Settings, SettingsError, load_settings
from .views import admin, consent, events, flows, health, sign_in
from .views import insights as insights_pages  # the name `insights` is portal.insights, the queries
from .views import worklists as worklist_pages  # likewise portal.worklists
from .webhooks import intake, receiver

PACKAGE_DIR = Path(__file__).resolve().parent
# Flask keys a test or deployment may pass in `config` beside the DESIGN §2 settings.
FLASK_KEYS = ("TESTING", "WTF_CSRF_ENABLED", "SERVER_NAME", "RATELIMIT_ENABLED", "PREFERRED_URL_SCHEME")


def _asset_folder(name: str) -> str:
    """templates/ or static/: inside the package when installed from a wheel, beside it in a checkout."""
    installed = PACKAGE_DIR / name
    return str(installed if installed.is_dir() else PACKAGE_DIR.parent / name)


def create_app(config: Mapping | None = None) -> Flask:
    """Build the portal. `config` replaces the environment (and `.env`) when given."""
    app = Flask(
        __name__,
        template_folder=_asset_folder("templates"),
        static_folder=_asset_folder("static"),
        instance_relative_config=True,
    )
    settings = _load_settings(app, config)
    _configure(app, settings, config or {})
    logs.init_app(app, settings.log_level)  # first: its hooks time and log every request, redirected ones too
    if settings.environment == "production" and not settings.webhook_secrets:
        app.logger.warning(
            "FLOW_WEBHOOK_SECRETS is empty: every webhook delivery will be refused (401, reason no_secret) until "
            "the service's webhook secret is set"
        )
    _init_extensions(app, settings)
    _register_blueprints(app, settings)
    _refuse_a_webhook_path_over_a_page(app, settings.webhook_path)
    errors.init_app(app)
    security.init_app(app, https=settings.public_url.startswith("https://"))
    cli.init_app(app)
    presentation.init_app(app)
    widgets.init_app(app)
    template_cache.init_app(app)
    configure_mappers()  # now, not in each worker's first request (~20 ms): every model is imported by here
    return app


def check_settings(
    config: Mapping | None = None, instance_path: str = "instance", reread_dotenv: bool = False
) -> Settings:
    """The settings, or one line on stderr naming what is wrong and exit status 2 (gunicorn.conf.py calls it;
    its reload with `reread_dotenv`)."""
    try:
        if config is None:
            # The working directory's .env only (never a parent's: a stray file there could redirect a secret),
            # never overriding the environment.
            _refuse_a_parent_dotenv()
            load_working_dotenv(reread=reread_dotenv)
        return load_settings(config, instance_path=instance_path, testing=bool(config and config.get("TESTING")))
    except SettingsError as error:
        if os.environ.get("FLASK_RUN_FROM_CLI") == "true" and {"--help", "-h"} & set(sys.argv):
            # `flask --help` lists the commands (Flask's own and `keys`) below the error instead of stopping
            raise NoAppException(f"portal: configuration error: {error}") from None
        print(f"portal: configuration error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def _refuse_a_webhook_path_over_a_page(app: Flask, path: str) -> None:
    """The webhook lane takes every POST to FLOW_WEBHOOK_PATH before any page sees it: it must not be a page's, nor
    the address a form of the portal posts to (/logout, /language)."""
    # The routes without the webhook's own, which would otherwise answer a POST there before a form's route
    pages = Map(
        [rule.empty() for rule in app.url_map.iter_rules() if rule.endpoint != "webhooks.receive"],
        converters=app.url_map.converters,
    )
    if any(_route_at(app, pages, path, method) for method in ("GET", "POST")):
        print(f"portal: configuration error: FLOW_WEBHOOK_PATH is a page of the portal: {path}", file=sys.stderr)
        raise SystemExit(2)


def _route_at(app: Flask, routes: Map, path: str, method: str) -> bool:
    """Whether a route answers `method` at `path` (or redirects to a page's own address from there)."""
    try:
        with app.app_context():  # a route's converter may read the app's settings (/flows/<flow id>)
            routes.bind("localhost").match(path, method=method)
    except (NotFound, MethodNotAllowed):
        return False
    except HTTPException:  # a redirect to a page's own address: a page all the same
        return True
    return True


_SET_FROM_DOTENV: set[str] = set()


def load_working_dotenv(reread: bool = False) -> None:
    """The working directory's .env into the environment, never over a variable set outside it. `reread` (a gunicorn
    reload, HUP): the file's new values replace the ones it set before, and what it no longer sets goes (load_dotenv
    alone kept the first values for good). Otherwise what it set stays: a worker started again between reloads
    takes the arbiter's settings, not an edit made since (workers that disagree on secrets or keys)."""
    path = Path.cwd() / ".env"
    values = {name: value for name, value in dotenv_values(path).items() if value is not None} if path.is_file() else {}
    if reread:
        for name in _SET_FROM_DOTENV - values.keys():
            os.environ.pop(name, None)
            _SET_FROM_DOTENV.discard(name)
    for name, value in values.items():
        if name not in os.environ or (reread and name in _SET_FROM_DOTENV):
            os.environ[name] = value
            _SET_FROM_DOTENV.add(name)


def _refuse_a_parent_dotenv() -> None:
    """The `flask` command has already read .env and .flaskenv from the nearest directory above that has one.

    FLASK_SKIP_DOTENV is not believed: the file it would have kept out may be the one that set it.
    """
    if os.environ.get("FLASK_RUN_FROM_CLI") != "true":
        return
    for name in (".flaskenv", ".env"):
        found = find_dotenv(name, usecwd=True)
        if found and Path(found).parent != Path.cwd():
            raise SettingsError(
                f"the flask command read {found}, above the working directory; move it into the working "
                "directory or remove it (a stray file there could redirect a secret)"
            )


def _load_settings(app: Flask, config: Mapping | None) -> Settings:
    return check_settings(config, app.instance_path)


def _configure(app: Flask, settings: Settings, overrides: Mapping) -> None:
    app.extensions[current.SETTINGS] = settings
    app.config.update(
        SECRET_KEY=settings.secret_key,
        SQLALCHEMY_DATABASE_URI=settings.database_url,
        SQLALCHEMY_ENGINE_OPTIONS=database.engine_options(settings),
        SESSION_COOKIE_NAME="flow_portal_session",
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",
        SESSION_COOKIE_SECURE=settings.public_url.startswith("https://"),
        REMEMBER_COOKIE_SECURE=settings.public_url.startswith("https://"),
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session_max_seconds),
        SESSION_REFRESH_EACH_REQUEST=False,  # the idle clock is written back once a minute (staff_sessions)
        MAX_CONTENT_LENGTH=max(settings.webhook_max_bytes, 1024 * 1024),
    )
    app.config.update({key: overrides[key] for key in FLASK_KEYS if key in overrides})
    # WSGI middleware the way Flask documents it (mypy sees wsgi_app as a method, hence the ignores).
    # Inside ProxyFix, so they see the client's host and address.
    headers = security.security_headers(settings.public_url.startswith("https://"))
    app.wsgi_app = intake.WebhookIntake(app.wsgi_app, app, headers)  # type: ignore[method-assign]
    # The one check of the Host header (any other is a 400, never echoed in a link), IPv6 literals included, which
    # Flask's TRUSTED_HOSTS cannot match.
    app.wsgi_app = security.TrustedHosts(app.wsgi_app, settings.trusted_hosts, headers)  # type: ignore[method-assign]
    if settings.trusted_proxies:
        # Behind N reverse proxies: the client address (audit log, throttling) and https come from them.
        hops = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops, x_port=hops)  # type: ignore[method-assign]


def _init_extensions(app: Flask, settings: Settings) -> None:
    db.init_app(app)
    database.configure_engine(app)
    migrate.init_app(app, db, directory=str(database.MIGRATIONS))
    csrf.init_app(app)
    throttle.init_app(app, settings.redis_url, settings.redis_prefix)
    i18n.init_app(app)
    staff_sessions.init_app(app, settings)
    app.extensions[current.FLOW_CLIENT] = build_client(settings)
    flow_index.init_app(app)
    notify.init_app(app)


def _register_blueprints(app: Flask, settings: Settings) -> None:
    app.url_map.converters["flow"] = FlowIdConverter  # before the routes that use it
    for module in (health, consent, sign_in, flows, events, insights_pages, worklist_pages, admin):
        app.register_blueprint(module.bp)
    app.register_blueprint(receiver.make_blueprint(settings.webhook_path))
