"""Languages of the portal's pages: English, Norwegian bokmål and Swedish, chosen per person."""

from flask import Flask, has_request_context, request, session

from .extensions import babel

LANGUAGES = {"en": "English", "nb": "Norsk bokmål", "sv": "Svenska"}
# Browsers in Norway often ask for "no" or "nn"; bokmål is the closest translation we have.
ALIASES = {"no": "nb", "nn": "nb"}


def select_language() -> str:
    """The language chosen in this session, else the best the browser asks for, else English."""
    if not has_request_context():
        return "en"  # commands and background work speak English
    chosen = session.get("language")
    if chosen in LANGUAGES:
        return chosen
    best = request.accept_languages.best_match([*LANGUAGES, *ALIASES], default="en")
    return ALIASES.get(best, best)


def init_app(app: Flask) -> None:
    babel.init_app(app, locale_selector=select_language)

    @app.context_processor
    def language_context():
        return {"languages": LANGUAGES, "current_language": select_language()}
