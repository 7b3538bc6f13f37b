"""The audit log of who saw personal data."""

from flask_limiter.util import get_remote_address

from .extensions import db
from .models import AuditEntry


def record_audit(username: str, action: str, target: str) -> None:
    """Commit the entry before anything is shown: no record, no reveal."""
    db.session.add(AuditEntry(username=username, action=action, target=target, source_ip=get_remote_address()))
    db.session.commit()
