"""The portal's own store: staff users, the audit log, webhook events and rejected deliveries."""

from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

from flask_login import UserMixin
from sqlalchemy import Date, DateTime, ForeignKey, Index, Integer, String, Text, UniqueConstraint, false, text
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.types import TypeDecorator
from werkzeug.security import check_password_hash, generate_password_hash

from .extensions import Base, db

if TYPE_CHECKING:
    Model = Base  # db.Model as a type checker sees it: Flask-SQLAlchemy builds that class from Base at run time
else:
    Model = db.Model

ROLES = ("viewer", "operator", "admin")
# What each role may do; a role includes everything of the roles before it.
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}


def role_at_least(held: str, wanted: str) -> bool:
    """Whether a person holding the role `held` may do what `wanted` may: the same role or one above it."""
    return ROLE_RANK.get(held, -1) >= ROLE_RANK[wanted]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class UtcDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes in and out, on SQLite (which keeps no zone) as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        return value.astimezone(timezone.utc) if value is not None else None

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class User(UserMixin, Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(80), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default="viewer")
    disabled: Mapped[bool] = mapped_column(default=False)
    sso_subject: Mapped[str | None] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    last_login_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # Every session carries the version it began with; bumping it ends them all (sign-out, role change, …).
    session_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    language: Mapped[str | None] = mapped_column(String(8))  # the pages' language the person chose; None: the browser's

    @property
    def is_active(self) -> bool:
        return not self.disabled

    def end_sessions(self) -> None:
        """End every session of this user, in every browser, at its next request (commit to take effect)."""
        self.session_version = (self.session_version or 1) + 1

    def set_password(self, password: str) -> None:
        self.password_hash = generate_password_hash(password)  # scrypt, werkzeug's default
        if self.id is not None:
            self.end_sessions()  # a new password ends the sessions the old one opened

    def check_password(self, password: str) -> bool:
        if not self.password_hash:
            return False
        return check_password_hash(self.password_hash, password)

    def can(self, role: str) -> bool:
        """True if this user's role is `role` or above it."""
        return role_at_least(self.role, role)


class AuditEntry(Model):
    """Who saw or did what to personal data, and when."""

    __tablename__ = "audit_log"
    # The action filter's choices walk it (`database.distinct_values`), and a rare action's page walks it by id.
    __table_args__ = (Index("ix_audit_log_action", "action", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    username: Mapped[str] = mapped_column(String(80), index=True)
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(255), index=True)
    source_ip: Mapped[str | None] = mapped_column(String(64))
    purpose: Mapped[str | None] = mapped_column(String(255))  # why personal data was looked at (a reveal)


class AccessEntry(Model):
    """One look at a person's data, kept under the person's pseudonymous subject key (never the id).

    Answers "who looked at this person's data, when and why" (CJEU C-579/21) from a national id typed in.
    """

    __tablename__ = "access_log"
    __table_args__ = (Index("ix_access_log_subject", "subject_key", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    subject_key: Mapped[str] = mapped_column(String(64))  # the keyed hash of the national id (PORTAL_INDEX_KEY)
    username: Mapped[str] = mapped_column(String(80))
    kind: Mapped[str] = mapped_column(String(40))  # what was seen: flow_detail, reveal, event_payload, …
    target: Mapped[str] = mapped_column(String(255))  # which flow, event or export
    purpose: Mapped[str | None] = mapped_column(String(255))
    source_ip: Mapped[str | None] = mapped_column(String(64))


class WebhookEvent(Model):
    """A verified webhook delivery, stored once per event id."""

    __tablename__ = "webhook_events"
    __table_args__ = (Index("ix_webhook_events_received", "received_at", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(255), unique=True)
    event_type: Mapped[str | None] = mapped_column(String(100), index=True)
    flow_id: Mapped[str | None] = mapped_column(String(100), index=True)
    reference_id: Mapped[str | None] = mapped_column(String(100), index=True)
    # The reference in lower case: the events filter finds a reference whatever its case, by index.
    reference_key: Mapped[str | None] = mapped_column(String(100), index=True)
    status: Mapped[str | None] = mapped_column(String(40))
    occurred_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    occurred_at_raw: Mapped[str | None] = mapped_column(String(64))  # the time as sent, when it was unusable
    received_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    body: Mapped[str] = mapped_column(Text)
    # Under hmac-sha256 (which signs nothing but the body) the raw body's hash, unique: a body seen before is
    # a replay, whatever unsigned id header it comes with, also when two arrive at once.
    body_sha256: Mapped[str | None] = mapped_column(String(64), index=True, unique=True)
    headers: Mapped[str] = mapped_column(Text, default="{}")
    scheme: Mapped[str] = mapped_column(String(40))
    secret_index: Mapped[int] = mapped_column(Integer)
    source_ip: Mapped[str | None] = mapped_column(String(64), index=True)


class RejectedDelivery(Model):
    """A webhook delivery that failed verification: a sample kept (bounded per source) so a bad secret is visible."""

    __tablename__ = "rejected_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    reason: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str | None] = mapped_column(String(40))  # the reason's kind, as tallied (none before 0018)
    source_ip: Mapped[str | None] = mapped_column(String(64), index=True)
    network: Mapped[str | None] = mapped_column(String(64), index=True)  # IPv4 /24, IPv6 /64 of source_ip
    # From an address that has delivered verified events: the service itself. Such samples (a secret
    # rotated on one side only) are never evicted to make room for strangers' junk.
    known_sender: Mapped[bool] = mapped_column(default=False, server_default="0")
    signature_headers: Mapped[str] = mapped_column(Text, default="{}")
    body_head: Mapped[str] = mapped_column(Text, default="")
    # Why verification failed, worked out while the secrets were at hand: a code and words for staff,
    # never a secret.
    diagnosis: Mapped[str | None] = mapped_column(String(40))
    diagnosis_detail: Mapped[str | None] = mapped_column(String(255))


class RejectionTally(Model):
    """How many deliveries were refused, per kind of reason and sending network: counts no flood can evict.

    Past TALLY_CAP rows the least recently seen networks are folded into one row per kind, OTHER_NETWORKS.
    """

    __tablename__ = "rejection_tallies"

    kind: Mapped[str] = mapped_column(String(40), primary_key=True)
    source_ip: Mapped[str] = mapped_column(String(64), primary_key=True)  # the network; "" when unknown
    count: Mapped[int] = mapped_column(Integer, default=0)
    first_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    last_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    last_reason: Mapped[str] = mapped_column(String(255), default="")


class PrunedEvent(Model):
    """The id of an event removed by retention: a later replay of it is a duplicate, not a new event."""

    __tablename__ = "pruned_webhook_events"

    event_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    pruned_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)


class CreateSubmission(Model):
    """One row per create-flow form, so a double click or a resend creates one flow, not two."""

    __tablename__ = "create_submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    username: Mapped[str] = mapped_column(String(80))
    flow_id: Mapped[str | None] = mapped_column(String(100))
    reference_id: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    # The create was sent and the service did not confirm it (a timeout, a 5xx): not in flight any more.
    unconfirmed: Mapped[bool] = mapped_column(default=False, server_default=false())


# A flow whose consent is not done, as SQLAlchemy renders portal/worklists.py's condition (SQLite matches a partial
# index's terms as written, and writes true and false as 1 and 0); the same text as migration 0010.
NOT_DONE = (
    "coalesce(consent_status, 'Unopened') IN ('Unopened', 'Opened')"
    " AND (coalesce(lifecycle, '') NOT IN ('completed', 'cancelled'))"
    " AND archived IS NOT {true} AND gone_at IS NULL AND unknown_at IS NULL AND stub IS {false}"
)


class FlowRecord(Model):
    """The portal's index of one flow: what it has seen of it, from every source, newest state winning.

    Personal data is kept only as far as search needs it: the national id as a keyed hash and a
    masked copy (never in full), the last name as written and in its search form.
    """

    __tablename__ = "flow_index"
    __table_args__ = (
        Index("ix_flow_index_created", "created_at", "id"),
        Index("ix_flow_index_changed", "changed_at", "id"),
        Index("ix_flow_index_last_change", "last_change_at", "id"),  # the list sorted by last change
        Index("ix_flow_index_archived_created", "archived", "created_at", "id"),
        # The state a search filters and counts by: a combination that never occurs (Unopened and completed)
        # is answered from here instead of by walking the sorted index (see the statistics in 0003).
        Index("ix_flow_index_state", "archived", "consent_status", "lifecycle"),
        Index("ix_flow_index_listed", "listed_at"),  # when the service last listed flows: max() by index
        # Insights count the flows created in a range from this index alone on PostgreSQL (index-only scans).
        Index(
            "ix_flow_index_insights",
            "created_at",
            postgresql_include=["consent_status", "opened_at", "decided_at", "archived", "lifecycle"],
        ),
        Index("ix_flow_index_decided", "decided_at"),  # decisions per day
        # Stuck flows: the flows not done (portal/worklists.py), by their last change (migration 0010).
        Index(
            "ix_flow_index_not_done_change",
            "last_change_at",
            "id",
            postgresql_where=text(NOT_DONE.format(true="true", false="false")),
            sqlite_where=text(NOT_DONE.format(true="1", false="0")),
        ),
        # Country and incidents filter with the consent status the counts group by: counted from the index.
        Index("ix_flow_index_country", "country", "consent_status"),
        Index("ix_flow_index_incidents", "has_incidents", "country", "consent_status"),
        # varchar_pattern_ops: `LIKE 'prefix%'` uses the index on PostgreSQL whatever the collation
        Index(
            "ix_flow_index_name", "last_name_key", "birth_date", postgresql_ops={"last_name_key": "varchar_pattern_ops"}
        ),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flow_id: Mapped[str] = mapped_column(String(100), unique=True)
    reference_id: Mapped[str | None] = mapped_column(String(100), index=True)
    flow_number: Mapped[int | None] = mapped_column(Integer, index=True)
    consent_status: Mapped[str | None] = mapped_column(String(40), index=True)
    lifecycle: Mapped[str | None] = mapped_column(String(40), index=True)
    archived: Mapped[bool | None] = mapped_column(index=True)
    country: Mapped[str | None] = mapped_column(String(2))
    national_id_hash: Mapped[str | None] = mapped_column(String(64), index=True)
    national_id_masked: Mapped[str | None] = mapped_column(String(40))
    last_name: Mapped[str | None] = mapped_column(String(100))
    last_name_key: Mapped[str | None] = mapped_column(String(100))
    birth_date: Mapped[date | None] = mapped_column(Date, index=True)
    created_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    updated_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    version: Mapped[int | None] = mapped_column(Integer)
    has_incidents: Mapped[bool | None] = mapped_column()
    created_by: Mapped[str | None] = mapped_column(String(80))
    # When what is kept was true (the service's updatedAt, an event's time, or when it was fetched):
    # sources tell different parts of a flow, so each part has its own time.
    status_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # the consent status
    lifecycle_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    archived_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    state_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # incidents, version
    status_source: Mapped[str | None] = mapped_column(String(16))  # which source said the consent status
    lifecycle_source: Mapped[str | None] = mapped_column(String(16))
    archived_source: Mapped[str | None] = mapped_column(String(16))
    changed_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)  # last change the portal saw
    change_source: Mapped[str] = mapped_column(String(16))  # create, list, detail, webhook, sync
    seen_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)  # last time any source named it
    listed_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # last time the service listed it
    stub: Mapped[bool] = mapped_column(default=False)  # known only from a webhook event so far
    gone_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # a sync found the service no longer lists it
    # Milestones of the consent, for insights: first known Opened (or past it), and Accepted/Rejected.
    # The last change staff can go by (the service's updatedAt, else the opening, creation, first sight):
    # kept by the index writer, so stuck flows are read in order from an index.
    last_change_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    opened_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    # What webhook events (or a refresh from the service) told the portal: compared with what the
    # service says, to find a change the portal never heard about.
    heard_version: Mapped[int | None] = mapped_column(Integer)
    heard_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    heard_status: Mapped[str | None] = mapped_column(String(40))
    gap_at: Mapped[datetime | None] = mapped_column(UtcDateTime, index=True)  # when a check found such a change
    gap_reason: Mapped[str | None] = mapped_column(String(255))
    unknown_at: Mapped[datetime | None] = mapped_column(UtcDateTime)  # the service answered 404 for this flow id
    actions: Mapped[str | None] = mapped_column(String(255))  # the retrieve response's actions, comma-separated
    # The person's data was erased (admin, data subjects): the row stays without it, and no source brings it back.
    erased_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class FlowIncident(Model):
    """An incident the service reported on a flow (retrieve response or `flow.incident` event).

    Open while the service still lists it; `resolved_at` once a fresh retrieve no longer does.
    """

    __tablename__ = "flow_incidents"
    __table_args__ = (
        UniqueConstraint("flow_id", "incident_id", name="uq_flow_incidents_flow_incident"),
        Index("ix_flow_incidents_open", "resolved_at", "task_type", "task_category"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    flow_id: Mapped[str] = mapped_column(String(100), index=True)
    incident_id: Mapped[str] = mapped_column(String(255))
    task_type: Mapped[str | None] = mapped_column(String(100))
    task_category: Mapped[str | None] = mapped_column(String(100))
    message: Mapped[str | None] = mapped_column(String(1000))  # masked before it is stored
    source: Mapped[str] = mapped_column(String(16))  # detail, webhook, sync
    first_seen_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    last_seen_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    resolved_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class Notification(Model):
    """An outgoing notice (a flow got an incident, or is stuck) on one channel, sent with retries."""

    __tablename__ = "notifications"
    __table_args__ = (
        UniqueConstraint("channel", "dedupe_key", name="uq_notifications_channel_key"),
        Index("ix_notifications_due", "status", "next_attempt_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    channel: Mapped[str] = mapped_column(String(16))  # webhook, email
    kind: Mapped[str] = mapped_column(String(40))  # incident, stuck, test
    dedupe_key: Mapped[str] = mapped_column(String(255))  # one notice per happening and channel
    flow_id: Mapped[str | None] = mapped_column(String(100), index=True)
    subject: Mapped[str] = mapped_column(String(255))
    payload: Mapped[str] = mapped_column(Text)  # the JSON sent (national ids masked)
    status: Mapped[str] = mapped_column(String(16), default="pending")  # pending, sent, failed
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    last_error: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    sent_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class NotificationAttempt(Model):
    """One try at delivering a notification: when, how it went, in words an admin can act on."""

    __tablename__ = "notification_attempts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    notification_id: Mapped[int] = mapped_column(
        Integer, ForeignKey("notifications.id", ondelete="CASCADE"), index=True
    )
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    ok: Mapped[bool] = mapped_column(default=False)
    detail: Mapped[str | None] = mapped_column(String(255))
    duration_ms: Mapped[int | None] = mapped_column(Integer)


class Lease(Model):
    """A named lock held in the database, so one `flows sync` runs at a time across every instance."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(40), primary_key=True)
    holder: Mapped[str | None] = mapped_column(String(120))
    expires_at: Mapped[datetime | None] = mapped_column(UtcDateTime)


class InsightQuarter(Model):
    """The flow index summed per UTC quarter hour, a cache for insights kept by portal/insight_rollups.py.

    What the flows created in the quarter are now (consent status, opened or past, archived, cancelled), and how
    many decisions were made in it (whenever their flows were created).
    """

    __tablename__ = "insight_quarters"

    quarter: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # Unix seconds // 900
    created: Mapped[int] = mapped_column(Integer)
    unopened: Mapped[int] = mapped_column(Integer)
    opened: Mapped[int] = mapped_column(Integer)
    accepted: Mapped[int] = mapped_column(Integer)
    rejected: Mapped[int] = mapped_column(Integer)
    opened_or_past: Mapped[int] = mapped_column(Integer)
    archived: Mapped[int] = mapped_column(Integer)
    cancelled: Mapped[int] = mapped_column(Integer)
    decisions: Mapped[int] = mapped_column(Integer)


class InsightDuration(Model):
    """How many flows created on a UTC day took a time to decision within one log-spaced bucket."""

    __tablename__ = "insight_durations"

    day: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)  # Unix seconds // 86400
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    flows: Mapped[int] = mapped_column(Integer)


class InsightDirty(Model):
    """A UTC quarter hour whose insight figures changed since they were summed; `stamp` grows with each change."""

    __tablename__ = "insight_dirty"

    quarter: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    stamp: Mapped[int] = mapped_column(Integer)
