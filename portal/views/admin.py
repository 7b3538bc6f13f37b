"""Admin pages: staff accounts, the audit log, rejected webhook deliveries."""

import json

from flask import Blueprint, render_template, request, url_for
from sqlalchemy import select

from ..extensions import db
from ..models import AuditEntry, RejectedDelivery, User
from ..paging import before_argument, newest_first
from ..security import role_required

bp = Blueprint("admin", __name__, url_prefix="/admin")

PAGE_SIZE = 50


def _page_of(model, endpoint: str) -> dict:
    """The newest-first page the query string asks for, with links to older rows and back to the newest."""
    before = before_argument(request.args.get("before"))
    page = newest_first(select(model), model, before, PAGE_SIZE)
    return {
        "page": page,
        "next_url": url_for(endpoint, before=page.next_before) if page.next_before else None,
        "newest_url": url_for(endpoint) if before else None,
    }


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
    """Who revealed which national id, and when."""
    return render_template("admin/audit.html", **_page_of(AuditEntry, "admin.audit"))


@bp.get("/rejected")
def rejected():
    """Deliveries that failed verification: a wrong secret shows up here, not in silence."""
    listing = _page_of(RejectedDelivery, "admin.rejected")
    headers = {row.id: json.loads(row.signature_headers or "{}") for row in listing["page"].rows}
    return render_template("admin/rejected.html", headers=headers, **listing)
