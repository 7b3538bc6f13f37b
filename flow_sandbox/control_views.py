"""Sandbox-only endpoints: flow control, counters, the webhook log, and the consent page."""

from flask import Blueprint, abort, jsonify, redirect, render_template
from flask_wtf import FlaskForm
from wtforms import SubmitField

from .runtime import ApiError, runtime
from .state import ACTIONS, ACTIVE, OPENED, UNOPENED, FlowNotFound, TransitionNotAllowed

bp = Blueprint("control", __name__)


def _apply(flow_id: str, action: str):
    try:
        return runtime().service.apply(flow_id, action)
    except FlowNotFound:
        raise ApiError(404, "not_found", "No flow with this id") from None
    except TransitionNotAllowed as error:
        raise ApiError(409, "conflict", str(error)) from None


@bp.get("/")
def home():
    """A person's way in: the newest flows with links to their consent pages."""
    return render_template("home.html", flows=runtime().store.newest(100), settings=runtime().settings)


@bp.post("/sandbox/flows/<flow_id>/<action>")
def control_flow(flow_id: str, action: str):
    """open | accept | reject | cancel | archive a flow, as the individual or an operator would."""
    if action not in ACTIONS:
        raise ApiError(404, "not_found", f"Unknown action; use one of {', '.join(ACTIONS)}")
    _apply(flow_id, action)
    return jsonify(runtime().store.snapshot(flow_id, lambda flow: flow.retrieve_response()))


@bp.get("/sandbox/stats")
def stats():
    """Counters that tests and demos read: token requests, flows, queued webhook deliveries."""
    return jsonify(
        {
            "token_requests": runtime().identity.token_requests,
            "flows": runtime().store.count(),
            "flows_created": runtime().service.flows_created,
            "webhooks_pending": runtime().sender.pending(),
        }
    )


@bp.get("/sandbox/webhooks")
def webhook_log():
    """The most recent webhook delivery attempts, oldest first."""
    return jsonify({"deliveries": list(runtime().sender.log)})


class ConsentForm(FlaskForm):
    accept = SubmitField("I consent")
    reject = SubmitField("I do not consent")


def _flow_or_404(flow_id: str):
    try:
        return runtime().store.get(flow_id)
    except FlowNotFound:
        abort(404)


@bp.route("/consent/<flow_id>", methods=["GET", "POST"])
def consent(flow_id: str):
    """The page where a person plays the individual: opening it marks the flow Opened."""
    flow = _flow_or_404(flow_id)
    if flow.status == UNOPENED and flow.lifecycle == ACTIVE:
        flow = runtime().service.apply(flow_id, "open")
    form = ConsentForm()
    if flow.status == OPENED and flow.lifecycle == ACTIVE and form.validate_on_submit():
        runtime().service.apply(flow_id, "accept" if form.accept.data else "reject")
        return redirect(flow.redirect_url, code=303)
    return render_template("consent.html", flow=flow, form=form)
