"""Admin pages: staff accounts, the audit log, rejected webhook deliveries."""

import json

from flask import Blueprint, render_template
from sqlalchemy import select

from ..extensions import db
from ..models import AuditEntry, RejectedDelivery, User
from ..security import role_required

bp = Blueprint("admin", __name__, url_prefix="/admin")

SHOWN_ROWS = 200


@bp.before_request
@role_required("admin")
def admins_only():
    """Every page here is for admins."""


@bp.get("/users")
def users():
    accounts = db.session.scalars(select(User).order_by(User.username))
    return render_template("admin/users.html", users=list(accounts))


@bp.get("/audit")
def audit():
    entries = db.session.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(SHOWN_ROWS))
    return render_template("admin/audit.html", entries=list(entries))


@bp.get("/rejected")
def rejected():
    """Deliveries that failed verification: a wrong secret shows up here, not in silence."""
    rows = list(db.session.scalars(select(RejectedDelivery).order_by(RejectedDelivery.id.desc()).limit(SHOWN_ROWS)))
    return render_template(
        "admin/rejected.html", rows=rows, headers={row.id: json.loads(row.signature_headers or "{}") for row in rows}
    )
