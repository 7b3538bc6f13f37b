"""The portal's own store: staff users, the audit log, webhook events and rejected deliveries."""

from datetime import datetime, timezone

from flask_login import UserMixin
from sqlalchemy import DateTime, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column
from werkzeug.security import check_password_hash, generate_password_hash

from .extensions import db

ROLES = ("viewer", "operator", "admin")
# What each role may do; a role includes everything of the roles before it.
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class UtcDateTime(db.TypeDecorator):
    """Aware UTC datetimes in and out, on SQLite (which keeps no zone) as on PostgreSQL."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return value.astimezone(timezone.utc) if value is not None else None

    def process_result_value(self, value, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


class User(UserMixin, db.Model):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(80), unique=True)
    password_hash: Mapped[str | None] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16), default="viewer")
    disabled: Mapped[bool] = mapped_column(default=False)
    sso_subject: Mapped[str | None] = mapped_column(String(255), unique=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    last_login_at: Mapped[datetime | None] = mapped_column(UtcDateTime)

    @property
    def is_active(self) -> bool:
        return not self.disabled

    def set_password(self, password: str) -> None:
        self.password_hash = generate_password_hash(password)  # scrypt, werkzeug's default

    def check_password(self, password: str) -> bool:
        return bool(self.password_hash) and check_password_hash(self.password_hash, password)

    def can(self, role: str) -> bool:
        """True if this user's role is `role` or above it."""
        return ROLE_RANK.get(self.role, -1) >= ROLE_RANK[role]


class AuditEntry(db.Model):
    """Who saw or did what to personal data, and when."""

    __tablename__ = "audit_log"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    username: Mapped[str] = mapped_column(String(80), index=True)
    action: Mapped[str] = mapped_column(String(40))
    target: Mapped[str] = mapped_column(String(255), index=True)
    source_ip: Mapped[str | None] = mapped_column(String(64))


class WebhookEvent(db.Model):
    """A verified webhook delivery, stored once per event id."""

    __tablename__ = "webhook_events"
    __table_args__ = (Index("ix_webhook_events_received", "received_at", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    event_id: Mapped[str] = mapped_column(String(255), unique=True)
    event_type: Mapped[str | None] = mapped_column(String(100), index=True)
    flow_id: Mapped[str | None] = mapped_column(String(100), index=True)
    reference_id: Mapped[str | None] = mapped_column(String(100), index=True)
    status: Mapped[str | None] = mapped_column(String(40))
    occurred_at: Mapped[datetime | None] = mapped_column(UtcDateTime)
    occurred_at_raw: Mapped[str | None] = mapped_column(String(64))  # the time as sent, when it was unusable
    received_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
    body: Mapped[str] = mapped_column(Text)
    headers: Mapped[str] = mapped_column(Text, default="{}")
    scheme: Mapped[str] = mapped_column(String(40))
    secret_index: Mapped[int] = mapped_column(Integer)
    source_ip: Mapped[str | None] = mapped_column(String(64))


class RejectedDelivery(db.Model):
    """A webhook delivery that failed verification: kept (bounded) so a bad secret is visible."""

    __tablename__ = "rejected_deliveries"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now, index=True)
    reason: Mapped[str] = mapped_column(String(255))
    source_ip: Mapped[str | None] = mapped_column(String(64))
    signature_headers: Mapped[str] = mapped_column(Text, default="{}")
    body_head: Mapped[str] = mapped_column(Text, default="")


class CreateSubmission(db.Model):
    """One row per create-flow form, so a double click or a resend creates one flow, not two."""

    __tablename__ = "create_submissions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token: Mapped[str] = mapped_column(String(64), unique=True)
    username: Mapped[str] = mapped_column(String(80))
    flow_id: Mapped[str | None] = mapped_column(String(100))
    reference_id: Mapped[str | None] = mapped_column(String(100))
    created_at: Mapped[datetime] = mapped_column(UtcDateTime, default=utc_now)
