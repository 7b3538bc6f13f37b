"""The words a person reads for the service's and the portal's codes: statuses, actions, audit actions.

The codes themselves (Accepted, cancel, reveal_national_id) stay as they are in data, URLs, exports and
tests; only what a page shows goes through here, in the reader's language. A code this table does not know
is shown as it came (masked), so a new value from the service is never hidden.
"""

import re

from flask_babel import LazyString
from flask_babel import gettext as _
from flask_babel import lazy_gettext as _l

from .i18n import translated
from .masking import mask_text

STATUS_LABELS = {
    # Consent (the service's words, DESIGN §3)
    "Unopened": _l("Unopened"),
    "Opened": _l("Opened"),
    "Accepted": _l("Accepted"),
    "Rejected": _l("Rejected"),
    # The flow's lifecycle
    "active": _l("active"),
    "completed": _l("completed"),
    "cancelled": _l("cancelled"),
}


def capitalised(label) -> LazyString:
    """A label that starts a line (a select's option) with a capital, in the reader's language: the lifecycle's
    words are written for the middle of a sentence."""
    return LazyString(lambda: (text := str(label))[:1].upper() + text[1:])


# A staff member's role, as the page header names it (the forms add what each may do).
ROLE_LABELS = {
    "viewer": _l("viewer"),
    "operator": _l("operator"),
    "admin": _l("admin"),
}

# The actions a retrieve response lists (spec §2.4: read, assign, cancel).
ACTION_LABELS = {
    "read": _l("Read"),
    "assign": _l("Assign"),
    "cancel": _l("Cancel"),
}

AUDIT_ACTION_LABELS = {
    "sign_in": _l("Signed in"),
    "sign_in_failed": _l("Sign-in failed"),
    "sign_out": _l("Signed out"),
    "create_flow": _l("Created a flow"),
    "reveal_national_id": _l("Revealed a national id"),
    "search_national_id": _l("Searched by national id"),
    "export_flows": _l("Exported flows"),
    "export_events": _l("Exported events"),
    "export_audit": _l("Exported the audit log"),
    "access_log_lookup": _l("Looked up who viewed a national id"),
    "subject_export": _l("Exported a person's data"),
    "subject_erase": _l("Erased a person's data"),
    "notification_test": _l("Sent a test notice"),
    "notification_retry": _l("Retried a notice"),
    "account.create": _l("Created an account"),
    "account.disable": _l("Disabled an account"),
    "account.enable": _l("Enabled an account"),
    "account.password": _l("Set a password"),
    "account.role": _l("Changed a role"),
    "account.sign_out_everywhere": _l("Signed an account out everywhere"),
    "account.unlock": _l("Unlocked an account"),
}

# What a person-data access was (portal.access_log's kinds).
ACCESS_KIND_LABELS = {
    "flow_detail": _l("Opened the flow's page"),
    "reveal": _l("Revealed the national id"),
    "event_payload": _l("Opened an event's payload"),
    "export_row": _l("Exported in a file"),
    "search": _l("Searched by national id"),
    "subject_lookup": _l("Looked up who viewed the data"),
}

# The kinds of a person's records a subject request exports or erases (PORTAL_LEGAL_HOLD names them by code).
RECORD_KIND_LABELS = {
    "flows": _l("flows in the index"),
    "events": _l("webhook events"),
    "incidents": _l("incidents of the flows"),
    "notifications": _l("notifications about the flows"),
    "create_submissions": _l("create submissions"),
    "audit": _l("audit entries"),
    "access_log": _l("access log entries"),
}


# The built-in reasons to reveal a national id (PORTAL_REVEAL_PURPOSES' default): the audit log keeps the
# English value, the form shows it in the reader's language. Purposes an administrator configures show as written.
PURPOSE_LABELS = {
    "Customer contact": _l("Customer contact"),
    "Identity check": _l("Identity check"),
    "Complaint handling": _l("Complaint handling"),
    "Fraud investigation": _l("Fraud investigation"),
    "Other": _l("Other"),
}


# The fixed words an access-log entry stores as its target (English, like every stored code); flow ids and event
# numbers stand as they are.
ACCESS_TARGET_LABELS = {
    "flow search": _l("flow search"),
    "flows export": _l("flows export"),
    "access log look-up": _l("access log look-up"),
    "new flow form": _l("New flow form (the person's flows waiting for an answer)"),
}
_EVENT_TARGET = re.compile(r"event ([0-9]{1,19})")


def access_target_label(target: str | None) -> str:
    """Where a person's data was seen, in the reader's language: "flow search" → "flödessökning"."""
    event = _EVENT_TARGET.fullmatch(target or "")
    if event:
        return _("event %(number)s", number=event[1])
    return _label(ACCESS_TARGET_LABELS, target)


def _label(table: dict, code) -> str:
    if code is None or code == "":
        return "—"
    known = table.get(code)
    return translated(known) if known is not None else mask_text(str(code))


def status_label(status: str | None) -> str:
    """A consent status or lifecycle as the reader's language says it: Accepted → Godtatt."""
    return _label(STATUS_LABELS, status)


def role_label(role: str | None) -> str:
    return _label(ROLE_LABELS, role)


OTHER_STORED = "Other"  # a reveal's purpose said in words is stored as "Other: <the words>", whatever the language


def purpose_label(purpose: str | None) -> str:
    if purpose and purpose.startswith(f"{OTHER_STORED}: "):
        other = _("Other")
        return f"{other}: {purpose.removeprefix(f'{OTHER_STORED}: ')}"
    return _label(PURPOSE_LABELS, purpose)


def action_label(action: str | None) -> str:
    return _label(ACTION_LABELS, action)


def audit_action_label(action: str | None) -> str:
    return _label(AUDIT_ACTION_LABELS, action)


def access_kind_label(kind: str | None) -> str:
    return _label(ACCESS_KIND_LABELS, kind)


def record_kind_label(kind: str | None) -> str:
    return _label(RECORD_KIND_LABELS, kind)
