"""Admin pages: staff accounts, the audit log, rejected webhook deliveries."""

import json

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from sqlalchemy import select

from ..accounts import AccountError, change_role, create_account, set_disabled
from ..extensions import db
from ..forms import NewUserForm, UserChangeForm
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


def _render_users(new_form: NewUserForm, status: int = 200):
    accounts = list(db.session.scalars(select(User).order_by(User.username)))
    change_forms = {user.id: UserChangeForm(prefix=f"user-{user.id}", role=user.role) for user in accounts}
    return render_template("admin/users.html", users=accounts, new_form=new_form, change_forms=change_forms), status


@bp.get("/users")
def users():
    """Staff accounts, with forms to add one and to change or disable each."""
    return _render_users(NewUserForm())


@bp.post("/users")
def create_user():
    form = NewUserForm()
    if form.validate_on_submit():
        try:
            create_account(form.username.data.strip(), form.role.data, form.password.data)
        except AccountError as error:
            form.username.errors = [*form.username.errors, str(error)]
        else:
            flash(_("%(name)s can now sign in.", name=form.username.data.strip()), "success")
            return redirect(url_for("admin.users"))
    return _render_users(form, 400)


@bp.post("/users/<int(max=2147483647):user_id>")
def change_user(user_id: int):
    """Save one account's role, or disable or enable it."""
    user = db.session.get(User, user_id) or abort(404)
    form = UserChangeForm(prefix=f"user-{user.id}")
    if not form.validate_on_submit():
        abort(400)
    if form.toggle.data and user.id == current_user.id:
        flash(_("You cannot disable your own account."), "danger")
        return redirect(url_for("admin.users"))
    try:
        if form.toggle.data:
            set_disabled(user, not user.disabled)
        else:
            change_role(user, form.role.data)
    except AccountError as error:
        flash(str(error), "danger")
    else:
        flash(_("%(name)s is saved.", name=user.username), "success")
    return redirect(url_for("admin.users"))


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
