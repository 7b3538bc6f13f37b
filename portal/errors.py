"""One renderer for every failure page, and the one place that maps Flow Service errors to pages."""

import logging

from flask import Flask, render_template, request
from flask_babel import lazy_gettext as _l
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException

from .flowapi import (
    FlowApiError,
    InsufficientScope,
    NotFound,
    RateLimited,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    ValidationFailed,
)

log = logging.getLogger(__name__)

PAGES = {
    400: (_l("Something in that request was not right"), _l("Go back and check what you entered.")),
    403: (
        _l("You do not have access to this"),
        _l("Your role does not allow this page. Ask an administrator if you need it."),
    ),
    404: (_l("Not found"), _l("There is nothing at this address. Check the link, or start again from the flow list.")),
    405: (_l("Not allowed"), _l("This address does not take that kind of request.")),
    413: (_l("Too large"), _l("What was sent is larger than the portal accepts.")),
    429: (_l("Too many attempts"), _l("Wait a minute and try again.")),
    500: (
        _l("Something went wrong on our side"),
        _l("The error was logged. Try again; if it keeps happening, tell support the time it happened."),
    ),
}

# Upstream failure -> (HTTP status, title, what the person can do, offer a retry link)
UPSTREAM_PAGES = (
    (
        NotFound,
        404,
        _l("Flow not found"),
        _l("The Flow Service has no flow with this id for your organization."),
        False,
    ),
    (
        ValidationFailed,
        400,
        _l("The Flow Service did not accept that"),
        _l("Check the address or the values and try again."),
        False,
    ),
    (
        Unauthorized,
        502,
        _l("The portal cannot sign in to the Flow Service"),
        _l("Its credentials were refused. An administrator should run `flask --app portal check`."),
        True,
    ),
    (
        InsufficientScope,
        403,
        _l("The portal is not allowed to do that"),
        _l("Its credentials lack the scope this needs. An administrator can request it from the operator."),
        False,
    ),
    (RateLimited, 503, _l("The Flow Service asks us to slow down"), _l("Wait a few seconds and try again."), True),
    (
        UpstreamTimeout,
        504,
        _l("The Flow Service is slow"),
        _l("It did not answer in time. Try again in a moment."),
        True,
    ),
    (
        UpstreamProtocolError,
        502,
        _l("The Flow Service sent something unexpected"),
        _l("Try again; if it keeps happening, tell support the code below."),
        True,
    ),
    (
        FlowApiError,
        503,
        _l("The Flow Service is unavailable"),
        _l("It could not be reached. Try again in a moment."),
        True,
    ),
)


def render_error(status: int, title: str, advice: str, *, support_code: str | None = None, retry: bool = False):
    return render_template(
        "errors/error.html",
        status=status,
        title=title,
        advice=advice,
        support_code=support_code,
        retry_url=request.full_path.rstrip("?") if retry and request.method == "GET" else None,
    ), status


def upstream_error_page(error: FlowApiError):
    for kind, status, title, advice, retry in UPSTREAM_PAGES:
        if isinstance(error, kind):
            log.warning("flow service error on %s: %s (%s)", request.path, type(error).__name__, error.support_code)
            return render_error(status, title, advice, support_code=error.support_code, retry=retry)
    raise AssertionError("FlowApiError is the last entry")


def _http_error(error: HTTPException):
    title, advice = PAGES.get(error.code, (error.name, error.description or ""))
    return render_error(error.code or 500, title, advice)


def _csrf_error(error: CSRFError):
    return render_error(
        400,
        _l("Your session expired"),
        _l("The form was open too long or you signed out meanwhile. Reload the page and try again."),
    )


def _unexpected(error: Exception):
    log.exception("unhandled error on %s", request.path)
    title, advice = PAGES[500]
    return render_error(500, title, advice)


def init_app(app: Flask) -> None:
    app.register_error_handler(CSRFError, _csrf_error)
    app.register_error_handler(FlowApiError, upstream_error_page)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
