"""Languages of the portal's pages: English, Norwegian bokmål, Swedish and Finnish, chosen per person."""

from flask import Flask, has_request_context, request, session
from flask_login import current_user

from .extensions import babel

LANGUAGES = {"en": "English", "nb": "Norsk bokmål", "sv": "Svenska", "fi": "Suomi"}
# Browsers in Norway often ask for "no" or "nn"; bokmål is the closest translation we have.
ALIASES = {"no": "nb", "nn": "nb"}


def select_language() -> str:
    """The language chosen (kept in the account and the session), else the best the browser asks for, else English."""
    if not has_request_context():
        return "en"  # commands and background work speak English
    chosen = _account_language() or session.get("language")
    if chosen in LANGUAGES:
        return chosen
    best = request.accept_languages.best_match([*LANGUAGES, *ALIASES], default="en")
    return ALIASES.get(best, best)


def _account_language() -> str | None:
    """The signed-in person's choice, so that a change in one browser holds in every other."""
    user = current_user
    return getattr(user, "language", None) if user and user.is_authenticated else None


def init_app(app: Flask) -> None:
    babel.init_app(app, locale_selector=select_language)

    @app.context_processor
    def language_context():
        return {"languages": LANGUAGES, "current_language": select_language()}
