"""One renderer for every failure page, and the one place that maps Flow Service errors to pages."""

import logging
from datetime import timedelta
from urllib.parse import urlsplit

from flask import Flask, jsonify, render_template, request
from flask_babel import LazyString, format_timedelta, gettext
from flask_babel import lazy_gettext as _l
from flask_wtf.csrf import CSRFError
from sqlalchemy.exc import DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException

from . import database, requestid, staff_sessions
from .access_log import FLOW_DETAIL, record_access
from .database import DatabaseUnavailable
from .extensions import db
from .flowapi import (
    Conflict,
    EndpointNotFound,
    FlowApiError,
    InsufficientScope,
    NotFound,
    RateLimited,
    SandboxInProduction,
    TokenRequestRefused,
    Unauthorized,
    UpstreamProtocolError,
    UpstreamTimeout,
    UpstreamUnavailable,
    ValidationFailed,
)
from .flowindex.status import FlowStatus, status_of_record
from .flowindex.store import index_record
from .flowlinks import is_local_path, return_address
from .models import FlowRecord

log = logging.getLogger(__name__)
DATABASE_RETRY_AFTER = 10  # seconds a webhook sender or a person is asked to wait while the database is away

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

RETRY_LATER = (429, 503)  # the same request can work a moment later: the page offers "Try again"

# Upstream failure -> (HTTP status, title, what the person can do, offer a retry link)
UPSTREAM_PAGES = (
    (
        SandboxInProduction,
        502,
        _l("The portal is not set up correctly"),
        _l(
            "FLOW_API_URL / FLOW_OIDC_URL point at the Flow Portal sandbox, a stand-in for tests and demos "
            "that a production portal refuses to use. An administrator should point them at the real Flow Service."
        ),
        False,
    ),
    (
        EndpointNotFound,
        502,
        _l("The portal is not set up correctly"),
        _l(
            "The Flow Service answered 404 for an address it must have. "
            "An administrator should check FLOW_API_URL and run `flask --app portal check`."
        ),
        False,
    ),
    (
        Conflict,
        409,
        _l("The Flow Service refused that"),
        _l("It conflicts with the flow's current state. Reload the flow and check it."),
        False,
    ),
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
        TokenRequestRefused,
        502,
        _l("The portal cannot sign in to the Flow Service"),
        _l(
            "The identity provider refused the portal's token request. "
            "An administrator should check FLOW_TOKEN_URL and the client settings and run `flask --app portal check`."
        ),
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


# The same failures of the identity provider, before any call to the Flow API: its name, not the service's.
IDENTITY_PROVIDER_PAGES = (
    (
        UpstreamTimeout,
        504,
        _l("The Flow Service's identity provider is slow"),
        _l("It did not answer the portal's token request in time. Try again in a moment."),
        True,
    ),
    (
        UpstreamProtocolError,
        502,
        _l("The Flow Service's identity provider sent something unexpected"),
        _l(
            "The portal cannot use its answer to the token request. If it keeps happening, an administrator should "
            "run `flask --app portal check` and tell the operator the code below."
        ),
        True,
    ),
    (
        UpstreamUnavailable,
        503,
        _l("The Flow Service's identity provider is unavailable"),
        _l("The portal cannot get a token to call the Flow Service. Try again in a moment."),
        True,
    ),
    (
        RateLimited,
        503,
        _l("The Flow Service's identity provider asks us to slow down"),
        _l("Wait a few seconds and try again."),
        True,
    ),
)


def service_away(error: FlowApiError) -> bool:
    """A failure that passes: the service down, slow, busy or garbled, or its identity provider down or slow. Not a
    setting to fix (no endpoint, no scope, a refused client, a token answer the portal cannot use): those want an
    administrator, not the portal's own data instead."""
    if isinstance(error, UpstreamProtocolError):
        return error.reached_api
    return isinstance(error, (UpstreamUnavailable, UpstreamTimeout, RateLimited))


def render_error(
    status: int,
    title: str,
    advice: str,
    *,
    support_code: str | None = None,
    retry: bool = False,
    retry_url: str | None = None,
    reason: str | None = None,
    reason_from_identity_provider: bool = False,
    service_away: bool = False,
    heard_of: bool = False,
    last_heard: tuple[FlowRecord, FlowStatus] | None = None,
):
    return render_template(
        "errors/error.html",
        status=status,
        service_away=service_away,
        heard_of=heard_of,
        last_heard=last_heard,
        title=title,
        advice=advice,
        reason=reason,
        reason_from_identity_provider=reason_from_identity_provider,
        # the portal's own request id when the service gave none: the log lines of this request carry it
        support_code=support_code or requestid.current(),
        retry_url=retry_url or _retry_url(retry),
    ), status


def _retry_url(retry: bool) -> str | None:
    """The page asked for again; none when its address holds a national id, or a mistyped one (it would stand in
    the page's links)."""
    path = request.full_path.rstrip("?")
    return path if retry and request.method == "GET" and return_address(path) == path else None


def _upstream_page(error: FlowApiError) -> tuple:
    if not error.reached_api and not isinstance(error, (TokenRequestRefused, SandboxInProduction)):
        found = next((entry for entry in IDENTITY_PROVIDER_PAGES if isinstance(error, entry[0])), None)
        if found:
            return found
    return next(entry for entry in UPSTREAM_PAGES if isinstance(error, entry[0]))  # FlowApiError is the last


def upstream_title(error: FlowApiError) -> str:
    """What went wrong with the Flow Service, in a few words in the reader's language."""
    return str(_upstream_page(error)[2])


def upstream_explained(error: FlowApiError) -> str:
    """What went wrong with the Flow Service and what to do, in the reader's language."""
    _kind, _status, title, advice, _retry = _upstream_page(error)
    return f"{title}. {_advice(error, advice)}"


def _advice(error: FlowApiError, advice: LazyString) -> LazyString | str:
    """The page's advice, told what the service said where it said more (a stand-in: "Wait a few seconds" for a
    429 asking for two minutes; "It could not be reached" for a service that answered its own 500)."""
    if isinstance(error, RateLimited) and error.retry_after is not None and error.retry_after > LONG_WAIT:
        wait = format_timedelta(timedelta(seconds=error.retry_after), threshold=1.1, add_direction=False)
        return gettext("It asks the portal to wait %(wait)s: try again after that.", wait=wait)
    if type(error) is UpstreamUnavailable and error.reached_api and error.status:
        return gettext(
            "It answered with an error of its own (HTTP %(status)s). Try again in a moment.", status=error.status
        )
    return advice  # as it was: lazy, rendered by the page in the reader's language


LONG_WAIT = 10  # seconds: a Retry-After "a few seconds" would not say


def upstream_status(error: FlowApiError) -> int:
    """The HTTP status the portal answers with for this failure of the Flow Service."""
    return _upstream_page(error)[1]


def log_upstream_error(error: FlowApiError) -> None:
    """One line for a failure of the Flow Service a page met: what support's code on the page finds."""
    log.warning(
        "flow service error on %r: %s (%r): %r", request.path, type(error).__name__, error.support_code, str(error)
    )


def upstream_error_page(error: FlowApiError):
    _kind, status, title, advice, retry = _upstream_page(error)
    log_upstream_error(error)
    return render_error(
        status,
        title,
        _advice(error, advice),
        support_code=error.support_code,
        retry=retry,
        reason=error.reason,
        reason_from_identity_provider=not error.reached_api,  # the token request failed, not the API call
        service_away=service_away(error),
        heard_of=isinstance(error, NotFound) and _flow_heard_of(),
        last_heard=_last_heard_of_this_flow() if service_away(error) else None,
    )


def _last_heard_of_this_flow() -> tuple[FlowRecord, FlowStatus] | None:
    """A flow's page whose service is away: what the index last heard of the flow, for the error page to show (a
    look at the person's data, so it goes into their access log as the flow's page would)."""
    flow_id = (request.view_args or {}).get("flow_id")
    if request.endpoint != "flows.detail" or not isinstance(flow_id, str) or database.database_unavailable():
        return None
    try:
        record = index_record(flow_id)
        if record is None:
            return None
        record_access(record.national_id_hash, FLOW_DETAIL, flow_id)
    except (DBAPIError, PoolTimeout) as error:  # the database away too: the error page without it
        db.session.rollback()
        log.warning("the flow's last known state could not be read: %s", type(error).__name__)
        return None
    return record, status_of_record(record)


def _flow_heard_of() -> bool:
    """Whether the flow a page asked the service for (and it said it has none) is in the portal's index: an
    archived flow some services no longer retrieve, or one it removed; what the portal last heard is still here."""
    flow_id = (request.view_args or {}).get("flow_id")
    return isinstance(flow_id, str) and index_record(flow_id) is not None


def _http_error(error: HTTPException):
    page = PAGES.get(error.code) if error.code is not None else None
    title, advice = page or (error.name, error.description or "")
    return render_error(error.code or 500, title, advice, retry=error.code in RETRY_LATER)


def csrf_error_page(error: CSRFError, retry_url: str | None = None):
    """A form whose security token expired: "Try again" goes back to the page the form was on (or `retry_url`)."""
    return render_error(
        400,
        _l("Your session expired"),
        _l("The form was open too long or you signed out meanwhile. Reload the page and try again."),
        retry_url=retry_url or page_of_the_form(),
    )


def page_of_the_form() -> str | None:
    """The portal page that sent this request (its Referer), when that is one of ours."""
    try:
        parts = urlsplit(request.referrer or "")
    except ValueError:  # a Referer no URL parser reads ("http://[")
        return None
    page = parts.path + (f"?{parts.query}" if parts.query else "")
    # Nor one whose address holds a national id (a search typed there): the link would show it whole.
    return page if parts.netloc == request.host and is_local_path(page) and return_address(page) == page else None


def _unexpected(error: Exception):
    log.exception("unhandled error on %r", request.path)
    db.session.rollback()  # a failed statement leaves the session unusable for the page that reports it
    title, advice = PAGES[500]
    return render_error(500, title, advice, retry=True)


def database_unavailable_page(error: Exception):
    """503 while the database is down or hung: the webhook sender retries, staff see the portal's own page."""
    if not database.is_unavailable(error):
        return _unexpected(error)
    database.mark_unavailable(error)
    staff_sessions.forget_user()  # the page's header would ask the database for the user again
    retry_after = {"Retry-After": str(DATABASE_RETRY_AFTER)}
    if request.endpoint == "webhooks.receive":
        return jsonify({"error": "database unavailable, retry later"}), 503, retry_after
    title, advice = _l("The portal's database is unavailable"), _l("Wait a few seconds and try again.")
    body, status = render_error(503, title, advice, retry=True)
    return body, status, retry_after


def init_app(app: Flask) -> None:
    for kind in (DatabaseUnavailable, DBAPIError, PoolTimeout):
        app.register_error_handler(kind, database_unavailable_page)
    app.register_error_handler(CSRFError, csrf_error_page)
    app.register_error_handler(FlowApiError, upstream_error_page)
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(Exception, _unexpected)
