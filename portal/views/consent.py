"""The one page for the individual rather than staff: where the Flow Service sends them after they answered."""

from flask import Blueprint, render_template

bp = Blueprint("consent", __name__)


@bp.get("/consent-complete")
def complete():
    """The default redirect URL of new flows (PORTAL_REDIRECT_URL); it shows nothing about the flow."""
    return render_template("consent/complete.html")
