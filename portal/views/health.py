"""Health checks for load balancers, and the page individuals land on after their consent."""

from flask import Blueprint, render_template
from sqlalchemy import text

from ..database import mark_unavailable
from ..extensions import db

bp = Blueprint("health", __name__)


@bp.get("/healthz")
def live():
    """The process is up; never touches the database, so it answers while the database hangs."""
    return {"status": "ok"}


@bp.get("/readyz")
def ready():
    """The process can reach its database."""
    try:
        db.session.execute(text("SELECT 1"))
    except Exception as error:  # any driver error means: not ready; the timeouts keep this answer quick
        mark_unavailable(error)
        return {"status": "unavailable", "database": "unreachable"}, 503
    return {"status": "ok", "database": "ok"}


@bp.get("/consent-complete")
def consent_complete():
    """Where the Flow Service sends the individual by default once they have answered."""
    return render_template("health/consent_complete.html")
