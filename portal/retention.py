"""`retention apply`: remove each kind of record once it is older than its setting, one run at a time.

Every kind is deleted in batches of BATCH rows, one transaction each, so a first run over years of rows
holds no lock for long. A run takes the `retention` lease (the database lock `flows sync` uses under its
own name): a second instance, from cron on another host, says so and leaves; removing what is already
gone removes nothing, so a run is idempotent.

The ids and body hashes of removed events (`pruned_webhook_events`) are kept forever: without them a
replay of a removed event would be stored as new (hmac-sha256 events without a time of their own are
never too old to replay). They hold no personal data and a few dozen bytes each.
"""

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy import delete, select, tuple_

from .database import changed_rows
from .extensions import db
from .flowindex.sync import DatabaseLease
from .insight_rollups import mark_flows
from .models import AccessEntry, AuditEntry, FlowRecord, Lease, RejectedDelivery, RejectionTally, utc_now
from .settings import Settings
from .webhooks.store import prune_events

LEASE_NAME = "retention"
BATCH = 1000  # rows per transaction

Renew = Callable[[], None]
T = TypeVar("T")


class RetentionLocked(Exception):
    """Another retention run holds the lease: this one removed nothing."""

    def __init__(self, held: Lease | None):
        until = held.expires_at.isoformat(timespec="seconds") if held and held.expires_at else None
        who = f"{held.holder}, until {until}" if held and held.holder and until else "released just now"
        super().__init__(f"another retention run holds the lock ({who}); nothing was removed")


def _delete_in_batches(model, keys: tuple, older, renew: Renew | None, before_delete=None) -> int:
    removed = 0
    while True:
        found = db.session.execute(select(*keys).where(older).limit(BATCH)).all()
        if len(keys) == 1:
            chosen = keys[0].in_([row[0] for row in found])
        else:
            chosen = tuple_(*keys).in_([tuple(row) for row in found])
        if found and before_delete:
            before_delete(chosen)
        removed += changed_rows(delete(model).where(chosen)) if found else 0
        db.session.commit()
        if len(found) < BATCH:
            return removed
        if renew:
            renew()


def prune_rejected_deliveries(before: datetime, renew: Renew | None = None) -> int:
    """Remove the samples of refused webhook deliveries made before `before`."""
    return _delete_in_batches(RejectedDelivery, (RejectedDelivery.id,), RejectedDelivery.at < before, renew)


def prune_rejection_tallies(before: datetime, renew: Renew | None = None) -> int:
    """Remove the counts of refusals whose kind and network last came before `before`."""
    keys = (RejectionTally.kind, RejectionTally.source_ip)
    return _delete_in_batches(RejectionTally, keys, RejectionTally.last_at < before, renew)


def prune_audit(before: datetime, renew: Renew | None = None) -> int:
    """Remove audit entries recorded before `before`."""
    return _delete_in_batches(AuditEntry, (AuditEntry.id,), AuditEntry.at < before, renew)


def prune_access_log(before: datetime, renew: Renew | None = None) -> int:
    """Remove the per-person access log's rows recorded before `before`."""
    return _delete_in_batches(AccessEntry, (AccessEntry.id,), AccessEntry.at < before, renew)


def prune_gone_flows(before: datetime, renew: Renew | None = None) -> int:
    """Remove index rows of flows a sync found gone from the service before `before`."""
    return _delete_in_batches(FlowRecord, (FlowRecord.id,), FlowRecord.gone_at < before, renew, mark_flows)


def _prune_events(before: datetime, renew: Renew | None = None) -> int:
    return prune_events(before, BATCH, renew)


@dataclass(frozen=True)
class Kind:
    name: str
    setting: str  # the Settings attribute holding its days; 0 keeps it forever
    variable: str
    prune: Callable[[datetime, Renew | None], int]
    when: str  # what its cutoff means, for the report line


# The order of the report.
KINDS = (
    Kind("events", "event_retention_days", "PORTAL_EVENT_RETENTION_DAYS", _prune_events, "received before"),
    Kind(
        "rejected deliveries",
        "rejected_retention_days",
        "PORTAL_REJECTED_RETENTION_DAYS",
        prune_rejected_deliveries,
        "refused before",
    ),
    Kind(
        "rejection tallies",
        "rejected_retention_days",
        "PORTAL_REJECTED_RETENTION_DAYS",
        prune_rejection_tallies,
        "last refused before",
    ),
    Kind("audit", "audit_retention_days", "PORTAL_AUDIT_RETENTION_DAYS", prune_audit, "recorded before"),
    Kind(
        "access log",
        "access_log_retention_days",
        "PORTAL_ACCESS_LOG_RETENTION_DAYS",
        prune_access_log,
        "recorded before",
    ),
    Kind("gone flows", "gone_flow_retention_days", "PORTAL_GONE_FLOW_RETENTION_DAYS", prune_gone_flows, "gone before"),
)


@dataclass(frozen=True)
class Removed:
    """What one kind's retention did: rows removed older than `before`; `before` None when kept forever."""

    kind: Kind
    count: int
    before: datetime | None

    def line(self) -> str:
        if self.before is None:
            return f"{self.kind.name}: kept forever ({self.kind.variable}=0)"
        return f"{self.kind.name}: removed {self.count} ({self.kind.when} {self.before.isoformat(timespec='seconds')})"


def under_lease(work: Callable[[Renew], T], clock: Callable[[], datetime] = utc_now) -> T:
    """Run `work(renew)` holding the retention lease; RetentionLocked when another run holds it."""
    lease = DatabaseLease(LEASE_NAME, clock)
    if not lease.acquire():
        raise RetentionLocked(lease.current())
    try:
        return work(lease.renew)
    finally:
        lease.release()


def apply_retention(
    settings: Settings, now: datetime | None = None, clock: Callable[[], datetime] = utc_now
) -> dict[str, Removed]:
    """Remove every kind's records older than its setting (as of `now`), in KINDS order, under the lease.

    Raises RetentionLocked when another run holds the lease, LeaseLost when one took it over meanwhile.
    """
    now = now or clock()

    def work(renew: Renew) -> dict[str, Removed]:
        removed = {}
        for kind in KINDS:
            days = getattr(settings, kind.setting)
            before = now - timedelta(days=days) if days else None
            count = kind.prune(before, renew) if before else 0
            removed[kind.name] = Removed(kind, count, before)
        return removed

    return under_lease(work, clock)
