"""Admin pages: staff accounts, the audit log, rejected webhook deliveries."""

import json
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

from flask import Blueprint, abort, flash, redirect, render_template, request, url_for
from flask_babel import gettext as _
from flask_login import current_user
from werkzeug.datastructures import MultiDict

from .. import current
from ..access_log import LOOKUP, accesses_of, count_accesses, masked_id_of, record_access, subject_key_of
from ..accounts import (
    AccountError,
    account_by_id,
    all_accounts,
    change_role,
    create_account,
    find_account,
    set_disabled,
    sign_out_everywhere,
)
from ..audit import EXPORT_FORMATS, AuditFilter, audit_actions, export_audit, find_audit, record_audit
from ..csvexport import download_response, for_spreadsheets
from ..flowindex.gapcheck import event_counts, gap_page, unknown_page
from ..flowindex.gaps import describe_gap
from ..flowindex.search import day_start
from ..flowlinks import SEALED, from_url_form, sent_whole, url_form
from ..forms import (
    AuditFilterForm,
    ConfirmForm,
    NewUserForm,
    OlderAccessesForm,
    RejectedFilterForm,
    SubjectLookupForm,
    SubjectRequestForm,
    UserChangeForm,
)
from ..labels import record_kind_label, role_label
from ..masking import mask_flow_id, mask_national_id, mask_text
from ..models import RejectedDelivery, utc_now
from ..notify import notifier, review
from ..notify.triggers import INCIDENT_NOTICES_PER_FLOW
from ..paging import before_argument, newest_first
from ..roles import role_required
from ..security import asked_here
from ..subjects import SERVICE_KEEPS_FLOWS, SubjectRecords, erase, export_document, find_subject
from ..throttle import network_named
from ..webhooks.diagnosis import KIND_TITLES
from ..webhooks.diagnosis import TITLES as DIAGNOSIS_TITLES
from ..webhooks.schemes import REJECTION_KINDS
from ..webhooks.store import diagnosis_summary, rejected_samples, rejection_summary, rejection_tallies

bp = Blueprint("admin", __name__, url_prefix="/admin")

PAGE_SIZE = 50
ACCESS_ROWS = 500  # a person's most recent accesses shown at once
TALLY_ROWS = 200  # counts by reason and address shown at once; the filters find any other


@bp.before_request
@role_required("admin")
def admins_only():
    """Every page here is for admins."""


def _render_users(new_form: NewUserForm, status: int = 200):
    accounts = all_accounts()
    change_forms = {user.id: UserChangeForm(prefix=f"user-{user.id}", role=user.role) for user in accounts}
    return render_template(
        "admin/users.html",
        users=accounts,
        form=new_form,  # the page's one form that can come back with errors: the title says so (base.html)
        change_forms=change_forms,
        sign_out_form=ConfirmForm(),
    ), status


@bp.get("/users")
def users():
    """Staff accounts, with forms to add one and to change or disable each."""
    return _render_users(NewUserForm())


@bp.post("/users")
def create_user():
    form = NewUserForm()
    if form.validate_on_submit():
        try:
            create_account(form.username.data.strip(), form.role.data, form.password.data, actor=current_user.username)
        except AccountError as error:
            field = getattr(form, error.field, form.username)  # the field it is about takes the error and the focus
            field.errors = [*field.errors, str(error)]
        else:
            flash(_("%(name)s can now sign in.", name=form.username.data.strip()), "success")
            return redirect(url_for("admin.users"))
    return _render_users(form, 400)


@bp.post("/users/<int(max=2147483647):user_id>")
def change_user(user_id: int):
    """Save one account's role, or disable or enable it."""
    user = account_by_id(user_id) or abort(404)
    form = UserChangeForm(prefix=f"user-{user.id}")
    if not form.validate_on_submit():
        abort(400)
    if form.toggle.data and user.id == current_user.id:
        flash(_("You cannot disable your own account."), "danger")
        return redirect(url_for("admin.users"))
    try:
        if form.toggle.data:
            set_disabled(user, not user.disabled, actor=current_user.username)
        else:
            change_role(user, form.role.data, actor=current_user.username)
    except AccountError as error:
        flash(str(error), "danger")
    else:
        flash(_account_changed(user, toggled=form.toggle.data), "success")
    return redirect(url_for("admin.users"))


def _account_changed(user, toggled: bool) -> str:
    """What the change did, in words: "tom is saved" said nothing of a disabled account's ended sessions."""
    if toggled and user.disabled:
        return _("%(name)s is disabled: they cannot sign in, and their sessions have ended.", name=user.username)
    if toggled:
        return _("%(name)s is enabled again and can sign in.", name=user.username)
    return _("%(name)s now has the role %(role)s.", name=user.username, role=role_label(user.role))


@bp.post("/users/<int(max=2147483647):user_id>/sign-out")
def sign_out_user(user_id: int):
    """End every session of one account, in every browser (a lost laptop, a shared screen)."""
    user = account_by_id(user_id) or abort(404)
    if not ConfirmForm().validate_on_submit():
        abort(400)
    sign_out_everywhere(user, actor=current_user.username)
    flash(_("Every session of %(name)s has ended.", name=user.username), "success")
    return redirect(url_for("admin.users"))


SEALABLE_FILTERS = ("user", "target")  # free text: a flow id, or anything typed, may read as a national id


def _audit_form() -> AuditFilterForm:
    """The audit log's filters from the query string, validated."""
    args = {name: value.strip() for name, value in request.args.items() if name != "before"}
    for name in SEALABLE_FILTERS:  # a value that reads as a national id, as links carry it
        if args.get(name, "").startswith(SEALED):
            args[name] = from_url_form(args[name]) or args[name]
    form = AuditFilterForm(audit_actions(), formdata=MultiDict(args))
    form.validate()
    return form


def _shown_sealed(form: AuditFilterForm) -> AuditFilterForm:
    """The boxes show a value that reads as a national id as the address holds it (after the search)."""
    for field in (form[name] for name in SEALABLE_FILTERS):
        if field.data:
            field.data = url_form(field.data)
    return form


def _sent_whole(form: AuditFilterForm) -> bool:
    """Whether a filter that reads as a national id came as typed: the view redirects to its sealed address."""
    return any(sent_whole((form[name].raw_data or [""])[0], request.args.get(name, "")) for name in SEALABLE_FILTERS)


def _audit_filters(form: AuditFilterForm) -> AuditFilter:
    """The form's filters; its days are days in PORTAL_TIMEZONE, the last one whole."""
    since, until = form.since.data, form.until.data
    return AuditFilter(
        username=_kept_under(form.user.data) if form.user.data else None,
        action=form.action.data or None,
        target=form.target.data or None,
        since=day_start(since) if since else None,
        until=day_start(until + timedelta(days=1)) if until else None,
    )


def _kept_under(typed: str) -> str:
    """The name entries are kept under: the account's own when `typed` names one in another letter case ("VERA")."""
    account = find_account(typed)
    return account.username if account is not None else typed


def _given(form: AuditFilterForm) -> dict[str, str]:
    """The filters given, as read (a sealed one opened)."""
    return {field.name: field.raw_data[0] for field in form if field.raw_data and field.raw_data[0]}


def _filter_args(form: AuditFilterForm) -> dict:
    """The filters given, as query arguments for the links that keep them (a Who or Target that reads as a national
    id sealed)."""
    return {name: url_form(value) if name in SEALABLE_FILTERS else value for name, value in _given(form).items()}


@bp.get("/audit")
def audit():
    """The audit log, newest first, filtered by who, what, target and day; its pages keep the filters."""
    form = _audit_form()
    if form.errors:
        return render_template("admin/audit.html", form=form, page=None), 400
    args, before = _filter_args(form), before_argument(request.args.get("before"))
    if _sent_whole(form):
        return redirect(url_for("admin.audit", **args, before=request.args.get("before") or None))
    page = find_audit(_audit_filters(form), before, PAGE_SIZE)
    target = form.target.data or ""
    return render_template(
        "admin/audit.html",
        target_holds_an_id=mask_text(target) != target,  # entries keep ids masked: a whole one matches none
        form=_shown_sealed(form),
        page=page,
        filtered=bool(args),
        next_url=url_for("admin.audit", **args, before=page.next_before) if page.next_before else None,
        newest_url=url_for("admin.audit", **args) if before else None,
        export_urls={fmt: url_for("admin.audit_export", fmt=fmt, **args) for fmt in EXPORT_FORMATS},
    )


@bp.get("/audit/export.<any(csv, jsonl):fmt>")
@asked_here
def audit_export(fmt: str):
    """The filtered audit log as CSV or JSON lines, oldest first, streamed; each export is audited too."""
    form = _audit_form()
    if form.errors:
        return render_template("admin/audit.html", form=form, page=None), 400
    if _sent_whole(form):
        return redirect(url_for("admin.audit_export", fmt=fmt, **_filter_args(form)))
    audited = {name: mask_flow_id(value) for name, value in _given(form).items()}
    record_audit(current_user.username, "export_audit", urlencode(audited) or "all entries")
    chunks = export_audit(_audit_filters(form), fmt, for_spreadsheets())
    return download_response(f"audit-{utc_now():%Y%m%d-%H%M%S}.{fmt}", chunks, EXPORT_FORMATS[fmt])


@bp.route("/access", methods=["GET", "POST"])
def access():
    """Who looked at one person's data, when and why, newest first; each look-up is itself recorded."""
    if "subject" in request.form:
        return _older_accesses(OlderAccessesForm())
    form = SubjectLookupForm()
    if not form.validate_on_submit():
        return render_template("admin/access.html", form=form, page=None), 400 if form.is_submitted() else 200
    subject_key = subject_key_of(form.national_id.data, form.country.data or None)
    if subject_key is None:
        form.national_id.errors = [_("This is not a valid Norwegian, Swedish or Finnish national id.")]
        return render_template("admin/access.html", form=form, page=None), 400
    masked = mask_national_id("".join(form.national_id.data.split()))
    record_audit(current_user.username, "access_log_lookup", f"national id {masked}")
    return _accesses_page(subject_key, masked, None)


def _older_accesses(form: OlderAccessesForm):
    """Another page of the person the page before looked up, by the subject key it carried."""
    before = before_argument(form.before.data)
    if not form.validate_on_submit() or (form.before.data and before is None):
        flash(_("Those entries cannot be shown: look the person up again."), "warning")
        return redirect(url_for("admin.access"))
    subject_key = form.subject.data
    masked = masked_id_of(subject_key)
    page = f" (entries before {before})" if before else ""
    record_audit(current_user.username, "access_log_lookup", f"national id {masked or '?'}{page}")
    return _accesses_page(subject_key, masked, before)


def _accesses_page(subject_key: str, masked: str | None, before: int | None):
    page, total = accesses_of(subject_key, before, ACCESS_ROWS), count_accesses(subject_key)  # without this look-up
    record_access(subject_key, LOOKUP, "access log look-up")
    older = OlderAccessesForm(formdata=None, subject=subject_key, before=page.next_before) if page.next_before else None
    newest = OlderAccessesForm(formdata=None, subject=subject_key, before="") if before else None
    return render_template(
        "admin/access.html",
        form=SubjectLookupForm(formdata=None),
        page=page,
        masked=masked,
        total=total,
        earlier_page=before is not None,
        older=older,
        newest=newest,
    )


def _kept_words(kept: dict[str, int], after: SubjectRecords | None) -> str:
    """What the legal hold kept, and whether a later access request still finds it (searches by the person's id
    keep its hash; entries on their flows no longer lead to them once the flows are gone from the index)."""
    still = {kind: count for kind, count in (after.counts() if after else {}).items() if kind in kept and count}
    if not still:
        return _(
            "Kept under the legal hold (PORTAL_LEGAL_HOLD): %(counts)s. They no longer lead to the person: "
            "a later access request will not find them.",
            counts=_in_words(kept),
        )
    return _(
        "Kept under the legal hold (PORTAL_LEGAL_HOLD): %(counts)s. Of these, %(still)s still name the person by "
        "the hash of their national id (searches by it): a later access request finds them.",
        counts=_in_words(kept),
        still=_in_words(still),
    )


@bp.route("/subjects", methods=["GET", "POST"])
def subjects():
    """Access and erasure requests: a person's stored records as one JSON document, or erased."""
    form = SubjectRequestForm()
    held = current.settings().legal_hold
    if not form.validate_on_submit():
        status = 400 if form.is_submitted() else 200
        return render_template("admin/subjects.html", form=form, held=held), status
    found = find_subject(form.national_id.data, form.country.data or None)
    if found is None:
        form.national_id.errors = [_("This is not a valid Norwegian, Swedish or Finnish national id.")]
        return render_template("admin/subjects.html", form=form, held=held), 400
    if form.erase.data:
        kept = {kind: count for kind, count in found.counts().items() if kind in held and count}
        removed = erase(found, held, current_user.username)
        erased = {kind: count for kind, count in removed.items() if kind not in held}
        flash(_("Erased: %(counts)s.", counts=_in_words(erased)), "success")
        if kept:
            flash(_kept_words(kept, find_subject(form.national_id.data, form.country.data or None)), "info")
        if erased.get("flows"):
            flash(str(SERVICE_KEEPS_FLOWS), "warning")
        return redirect(url_for("admin.subjects"))
    record_audit(current_user.username, "subject_export", f"subject {found.subject_key[:12]}")
    document = json.dumps(export_document(found), ensure_ascii=False, indent=2)
    return download_response(f"subject-{found.subject_key[:12]}.json", [document], "application/json")


def _in_words(counts: dict[str, int]) -> str:
    return ", ".join(f"{record_kind_label(kind)} {count}" for kind, count in counts.items())


@bp.get("/rejected")
def rejected():
    """Refused deliveries: every one counted by reason and address, the newest kept as samples."""
    form = RejectedFilterForm(REJECTION_KINDS, DIAGNOSIS_TITLES, KIND_TITLES, formdata=request.args)
    if not form.validate():
        html = render_template(
            "admin/rejected.html", form=form, summary=rejection_summary(), kind_titles=KIND_TITLES, page=None
        )
        return html, 400
    kind, source = form.kind.data or None, (form.source.data or "").strip() or None
    why = form.diagnosis.data or None
    network = network_named(source) if source else None
    args: dict[str, Any] = {
        name: value for name, value in (("kind", kind), ("source", source), ("diagnosis", why)) if value
    }
    before = before_argument(request.args.get("before"))
    page = newest_first(rejected_samples(network, why, kind), RejectedDelivery, before, PAGE_SIZE)
    return render_template(
        "admin/rejected.html",
        form=form,
        summary=rejection_summary(),
        diagnoses=diagnosis_summary(),
        diagnosis_titles=DIAGNOSIS_TITLES,
        kind_titles=KIND_TITLES,
        tallies=[] if why else rejection_tallies(kind, network, TALLY_ROWS),  # counts are not kept per diagnosis
        diagnosis_chosen=why,
        tally_rows=TALLY_ROWS,
        page=page,
        headers={row.id: json.loads(row.signature_headers or "{}") for row in page.rows},
        next_url=url_for("admin.rejected", **args, before=page.next_before) if page.next_before else None,
        newest_url=url_for("admin.rejected", **args) if before else None,
    )


# -- notifications -----------------------------------------------------------------------------


@bp.get("/notifications")
def notifications():
    """Outgoing notices, newest first, each with its attempts; the channels they go out on."""
    settings = current.settings()
    before = before_argument(request.args.get("before"))
    page = review.notices(before, PAGE_SIZE)
    return render_template(
        "admin/notifications.html",
        channels=review.channels(settings),
        page=page,
        attempts=review.attempts_of([row.id for row in page.rows]),
        incident_notices_per_flow=INCIDENT_NOTICES_PER_FLOW,
        action_form=ConfirmForm(),
        next_url=url_for("admin.notifications", before=page.next_before) if page.next_before else None,
        newest_url=url_for("admin.notifications") if before else None,
    )


@bp.post("/notifications/test")
def notification_test():
    """Queue a test notice on every configured channel; the sender delivers it within seconds."""
    if not ConfirmForm().validate_on_submit():
        abort(400)
    sent_on = review.queue_test(current.settings(), notifier().clock())
    if not sent_on:
        flash(_("Notifications are off: there is no channel to test."), "warning")
        return redirect(url_for("admin.notifications"))
    record_audit(current_user.username, "notification_test", "channels " + ", ".join(sent_on))
    notifier().wake()
    channels = ", ".join(sent_on)
    flash(_("A test notice is on its way (%(channels)s); reload to see how it went.", channels=channels), "success")
    return redirect(url_for("admin.notifications"))


@bp.post("/notifications/<int(max=2147483647):notice_id>/retry")
def notification_retry(notice_id: int):
    """Give a failed notice one more attempt, now."""
    if not ConfirmForm().validate_on_submit():
        abort(400)
    if not review.retry_now(notice_id, notifier().clock()):
        flash(_("Only a failed notice can be retried."), "warning")
        return redirect(url_for("admin.notifications"))
    record_audit(current_user.username, "notification_retry", f"notification {notice_id}")
    notifier().wake()
    flash(_("The notice will be tried again within seconds."), "success")
    return redirect(url_for("admin.notifications"))


# -- gaps --------------------------------------------------------------------------------------


@bp.get("/gaps")
def gaps():
    """Flows with a change the portal never heard about, and events for flows the service does not know."""
    before, unknown_before = (before_argument(request.args.get(name)) for name in ("before", "unknown_before"))
    page, unknown = gap_page(before, PAGE_SIZE), unknown_page(unknown_before, PAGE_SIZE)
    return render_template(
        "admin/gaps.html",
        page=page,
        unknown=unknown,
        reasons={row.id: describe_gap(row.gap_reason) for row in page.rows},
        event_counts=event_counts([row.flow_id for row in unknown.rows]),
        refresh_form=ConfirmForm(),
        next_url=_gaps_url(before=page.next_before, unknown_before=unknown_before) if page.next_before else None,
        newest_url=_gaps_url(unknown_before=unknown_before) if before else None,
        unknown_next_url=_gaps_url(before=before, unknown_before=unknown.next_before) if unknown.next_before else None,
        unknown_newest_url=_gaps_url(before=before) if unknown_before else None,
    )


def _gaps_url(**positions: int | None) -> str:
    """The gaps page at these positions of its two lists."""
    given: dict[str, Any] = {name: value for name, value in positions.items() if value}
    return url_for("admin.gaps", **given)
