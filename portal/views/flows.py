"""Flows: the paged list with the archived filter, the detail page, creating a flow."""

import re
import secrets
from dataclasses import dataclass

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user

from ..audit import record_audit
from ..flowapi import (
    FlowApiError,
    FlowClient,
    InsufficientScope,
    NotFound,
    RateLimited,
    Unauthorized,
    ValidationFailed,
)
from ..forms import ConfirmForm, CreateFlowForm
from ..security import role_required
from ..submissions import SubmissionInProgress, claim_submission, forget_submission, settle_submission
from ..webhooks.store import events_for_flow

bp = Blueprint("flows", __name__, url_prefix="/flows")

PAGE_SIZES = (10, 25, 50, 100)
FLOW_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")


def flow_client() -> FlowClient:
    return current_app.extensions["flow_client"]


def settings():
    return current_app.extensions["portal.settings"]


@dataclass(frozen=True)
class ListQuery:
    """The list's state, all of it in the query string."""

    limit: int = 10
    archived: bool = False
    after: str | None = None
    before: str | None = None

    def url(self, **changes) -> str:
        values = {"limit": self.limit, "archived": self.archived, "after": None, "before": None} | changes
        args = {
            "limit": values["limit"] if values["limit"] != 10 else None,
            "archived": "true" if values["archived"] else None,
            "after": values["after"],
            "before": values["before"],
        }
        return url_for("flows.index", **{key: value for key, value in args.items() if value})


def _parse_list_query(args) -> tuple[ListQuery, list[str]]:
    """The query, with every unusable parameter dropped and a message saying so."""
    problems = []
    limit = args.get("limit", "10")
    if limit not in {str(size) for size in PAGE_SIZES}:
        problems.append(_("Page size must be one of %(sizes)s; showing 10.", sizes=", ".join(map(str, PAGE_SIZES))))
        limit = "10"
    archived = args.get("archived", "false").lower()
    if archived not in ("true", "false"):
        problems.append(_("The archived filter is true or false; showing current flows."))
        archived = "false"
    after, before = args.get("after") or None, args.get("before") or None
    if any(cursor and not FLOW_ID.fullmatch(cursor) for cursor in (after, before)) or (after and before):
        problems.append(_("That page position is not valid; showing the first page."))
        after = before = None
    return ListQuery(int(limit), archived == "true", after, before), problems


@bp.get("")
def index():
    """The flow list, newest first, paged with the service's cursors."""
    query, problems = _parse_list_query(request.args)
    if problems:
        for problem in problems:
            flash(problem, "warning")
        return redirect(query.url(after=query.after, before=query.before))
    try:
        page = flow_client().list_flows(query.limit, query.archived, query.after, query.before)
    except ValidationFailed:
        flash(_("That page position no longer exists; showing the first page."), "warning")
        return redirect(query.url())
    if query.before and not page.has_more:
        # Back at the newest flows: show the first page whole, not the short remainder.
        return redirect(query.url())
    return render_template(
        "flows/index.html",
        page=page,
        query=query,
        previous_url=_previous_url(query, page),
        next_url=_next_url(query, page),
    )


def _previous_url(query: ListQuery, page) -> str | None:
    if query.after or (query.before and page.has_more):
        return query.url(before=page.first_id or query.after)
    return None


def _next_url(query: ListQuery, page) -> str | None:
    moving_back = bool(query.before)
    if (moving_back or page.has_more) and page.last_id:
        return query.url(after=page.last_id)
    return None


def _valid_flow_id(flow_id: str) -> str:
    if not FLOW_ID.fullmatch(flow_id):
        abort(404)
    return flow_id


def _sandbox_consent_url(flow) -> str | None:
    """Where a person plays the individual, for a flow of the sandbox (not a real service's)."""
    path = flow.sandbox_config.get("consentUrl")
    if flow.sandbox and isinstance(path, str) and path.startswith("/consent/"):
        return settings().api_url + path
    return None


def _render_detail(flow_id: str, revealed: bool = False):
    flow = flow_client().get_flow(_valid_flow_id(flow_id))
    return render_template(
        "flows/detail.html",
        flow=flow,
        revealed=revealed,
        consent_url=_sandbox_consent_url(flow),
        events=events_for_flow(flow.flow_id, flow.reference_id),
        reveal_form=ConfirmForm(),
    )


@bp.get("/<flow_id>")
def detail(flow_id: str):
    """Everything the service knows about one flow, and the webhook events received for it."""
    return _render_detail(flow_id)


@bp.post("/<flow_id>/reveal")
@role_required("operator")
def reveal(flow_id: str):
    """Show the full national id once; who saw it and when goes to the audit log."""
    if not ConfirmForm().validate_on_submit():
        abort(400)
    record_audit(current_user.username, "reveal_national_id", _valid_flow_id(flow_id))
    return _render_detail(flow_id, revealed=True)


@bp.route("/new", methods=["GET", "POST"])
@role_required("operator")
def new():
    """Create a flow; a resent form (double click, reload) creates it once."""
    countries = settings().create_countries
    form = CreateFlowForm(countries, data=_create_defaults())
    if not countries:
        flash(_("No create scope is configured (FLOW_SCOPES), so no flow can be created."), "warning")
    elif form.validate_on_submit():
        return _create(form)
    return render_template("flows/new.html", form=form)


def _create_defaults() -> dict:
    if request.method == "POST":
        return {}
    return {
        "redirect_url": settings().redirect_url,
        "webhook_url": settings().webhook_url,
        "submission": secrets.token_urlsafe(24),
    }


def _create(form: CreateFlowForm):
    """Claim the form's token, send the flow, settle the token; then show the new flow."""
    try:
        earlier = claim_submission(form.submission.data, current_user.username)
    except SubmissionInProgress:
        flash(
            _(
                "This form was sent already and the Flow Service has not confirmed it. "
                "Check the flow list before creating the flow again."
            ),
            "warning",
        )
        return redirect(url_for("flows.index"))
    if earlier:
        return redirect(url_for("flows.detail", flow_id=earlier))
    try:
        created = _send(form)
    except ValidationFailed as error:
        forget_submission(form.submission.data)
        _attach_upstream_errors(form, error)
        return render_template("flows/new.html", form=form), 422
    except FlowApiError as error:
        return _unconfirmed(form, error)
    settle_submission(form.submission.data, created.flow_id, created.reference_id)
    flash(_("Flow %(reference)s was created.", reference=created.reference_id or created.flow_id), "success")
    return redirect(url_for("flows.detail", flow_id=created.flow_id))


def _send(form: CreateFlowForm):
    return flow_client().create_flow(
        form.national_id.data,
        form.last_name.data.strip(),
        form.redirect_url.data.strip(),
        (form.webhook_url.data or "").strip(),
    )


def _unconfirmed(form: CreateFlowForm, error: FlowApiError):
    """A failed create: re-raise if it surely created nothing, else keep the token and say so."""
    if _surely_not_created(error):
        forget_submission(form.submission.data)
        raise error
    # The service may have created the flow and failed to answer: keeping the token means
    # sending this form again cannot create a second one.
    flash(
        _(
            "The Flow Service did not confirm the flow. It may have been created: "
            "check the flow list before creating it again."
        ),
        "warning",
    )
    return render_template("flows/new.html", form=form), 504


def _surely_not_created(error: FlowApiError) -> bool:
    """True when the request cannot have reached the service, or the service said no."""
    refused = isinstance(error, (Unauthorized, InsufficientScope, RateLimited, NotFound))
    return refused or error.code in ("unreachable", "connect_timeout", "tls", "token_unreachable")


UPSTREAM_FIELDS = {
    "nationalId": "national_id",
    "lastName": "last_name",
    "redirectUrl": "redirect_url",
    "webhookUrl": "webhook_url",
}


def _attach_upstream_errors(form: CreateFlowForm, error: ValidationFailed) -> None:
    """Put each of the service's field errors under the field it is about."""
    unplaced = []
    for detail in error.details:
        field = getattr(form, UPSTREAM_FIELDS.get(detail.field, ""), None)
        if field is not None:
            field.errors = [*field.errors, _("The Flow Service says: %(message)s", message=detail.message)]
        else:
            unplaced.append(detail.message)
    if unplaced or not error.details:
        reasons = "; ".join(unplaced) or str(error)
        flash(_("The Flow Service did not accept the flow: %(reasons)s", reasons=reasons), "danger")
