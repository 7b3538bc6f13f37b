"""Languages of the portal's pages: English, Norwegian bokmål, Swedish and Finnish, chosen per person."""

import logging
from collections.abc import Callable, Hashable
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

import flask_babel
from babel.numbers import format_decimal
from flask import Flask, g, has_request_context, request, session
from flask_babel import get_locale, get_translations
from flask_login import current_user
from jinja2 import pass_context
from jinja2.runtime import Context
from markupsafe import Markup

from .extensions import babel

log = logging.getLogger(__name__)

T = TypeVar("T")
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


def request_translations():
    """This request's catalogue, found once: Flask-Babel looks it up again for every word, and a list page says
    the same few words in every row."""
    return _once_a_request("_translations", get_translations)


def _once_a_request(name: str, make: Callable[[], T]) -> T:
    """`make()`, kept for the rest of the request in `g` under `name`; made at each call outside a request."""
    if not has_request_context():
        return make()
    found = g.get(name)
    if found is None:
        found = make()
        setattr(g, name, found)
    return found


def language_changed() -> None:
    """The language was chosen anew during this request: what speaks the old one is found again."""
    flask_babel.refresh()
    for name in ("_translations", "_words", "_translated"):
        g.pop(name, None)


def gettext(string: str, **variables) -> str:
    """Flask-Babel's `gettext`, with the request's catalogue found once."""
    text = request_translations().ugettext(string)
    return text % variables if variables else text


def translated(text) -> str:
    """A lazy string (a label table's entry) in this request's language, translated once per request."""
    if not has_request_context():
        return str(text)
    memo = g.get("_translated")
    if memo is None:
        memo = g._translated = {}
    found = memo.get(id(text))  # the tables' lazy strings live as long as the process
    if found is None:
        found = memo[id(text)] = str(text)
    return found


class Words:
    """A request's words, each made once per language for the process: a list says the same few in every row
    (its statuses, their sources, "Consent"), and a look-up through Flask-Babel costs a context look-up or two
    each time; the catalogues do not change while the process runs, so neither do the words."""

    def __init__(self) -> None:
        self.language = str(get_locale() or "en")
        self._said = _SAID_IN.setdefault(self.language, {})

    def __call__(self, word: Callable[..., str], *args: Hashable) -> str:
        """`word(*args)`: a function of the language alone (a label, a source's name, escaping), made once."""
        key = (word, *args)
        text = self._said.get(key)
        if text is None:
            if len(self._said) >= MOST_WORDS_KEPT:  # the service's own values come here too: keep it bounded
                self._said.clear()
            text = self._said[key] = word(*args)
        return text

    def gettext(self, message: str) -> str:
        """The message in this request's language (`pybabel extract` finds it by this method's name)."""
        return self(gettext, message)


MOST_WORDS_KEPT = 4096
_SAID_IN: dict[str, dict[tuple, str]] = {}  # language -> (word, *args) -> text


def request_words() -> Words:
    """This request's Words (fresh ones outside a request: commands speak English)."""
    return _once_a_request("_words", Words)


@pass_context
def _page_gettext(context: Context, message: str, **variables: Any) -> str:
    text = request_translations().ugettext(message)
    if context.eval_ctx.autoescape:
        text = Markup(text)  # noqa: S704 - our own catalogues, as Jinja's newstyle gettext trusts them
    return text % variables if variables or "%" in text else text


@pass_context
def _page_ngettext(context: Context, singular: str, plural: str, num: int, **variables: Any) -> str:
    """Jinja's newstyle ngettext, with `%(num)s` written as the reader's language groups numbers (8,760 hours)."""
    text = request_translations().ungettext(singular, plural, num)
    if context.eval_ctx.autoescape:
        text = Markup(text)  # noqa: S704 - our own catalogues, as Jinja's newstyle gettext trusts them
    variables.setdefault("num", grouped(num, request_words().language))
    return text % variables


def as_sentence(text: str) -> str:
    """Words from elsewhere (a service, a form library's catalogue) as a sentence: "Not a valid choice" gets its
    full stop where a language's catalogue leaves it out, before the next sentence follows."""
    text = str(text).strip()
    return text if text.endswith((".", "!", "?", "…")) else text + "."


@lru_cache(maxsize=1024)
def grouped(number: int, language: str) -> str:
    """`number` as `language` writes it (8,760; 8 760), kept once made: a page counts in a sentence or two."""
    return format_decimal(number, locale=language)


def init_app(app: Flask) -> None:
    babel.init_app(app, locale_selector=select_language)
    _warn_of_uncompiled_catalogues()
    app.jinja_env.install_gettext_callables(  # type: ignore[attr-defined]  # added by jinja2.ext.i18n, untyped
        gettext=lambda string: request_translations().ugettext(string),
        ngettext=lambda singular, plural, n: request_translations().ungettext(singular, plural, n),
        pgettext=lambda context, string: request_translations().upgettext(context, string),
        npgettext=lambda context, singular, plural, n: request_translations().unpgettext(context, singular, plural, n),
        newstyle=True,
    )
    # `_` straight to the catalogue: Jinja's own alias reaches it through two more context calls, and a page
    # says `_` a few dozen times. The same rule as Jinja's newstyle gettext: autoescaped, always formatted.
    app.jinja_env.globals["_"] = app.jinja_env.globals["gettext"] = _page_gettext
    app.jinja_env.globals["ngettext"] = _page_ngettext

    @app.context_processor
    def language_context():
        # The language Flask-Babel chose for this request (select_language, once), not chosen again per page.
        return {"languages": LANGUAGES, "current_language": request_words().language}


def _warn_of_uncompiled_catalogues(folder: Path = Path(__file__).parent / "translations") -> None:
    """Say so when a language's catalogue was never compiled (a checkout served without `pybabel compile`, or an
    installed copy shadowed by the checkout it runs from): its pages would come out in English, with no error."""
    missing = sorted(
        po.parent.parent.name for po in folder.glob("*/LC_MESSAGES/messages.po") if not po.with_suffix(".mo").exists()
    )
    if missing:
        log.warning(
            "translations of %s are not compiled: their pages show in English (pybabel compile -d %s)",
            ", ".join(missing),
            folder,
        )
