"""Create-flow submissions, keyed by a token the form carries, so a resend never creates twice."""

import time
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError

from .extensions import db
from .models import CreateSubmission

WAIT_FOR_FIRST = 5.0  # seconds a resend waits for the first submission to finish


class SubmissionInProgress(Exception):
    """The same form is still being created by an earlier request."""


class SubmissionUnconfirmed(Exception):
    """The same form was sent before and the service did not confirm it: it may or may not have created the flow."""

    def __init__(self, token: str, sent_at: datetime) -> None:
        super().__init__(token)
        self.sent_at = sent_at


def claim_submission(token: str, username: str) -> str | None:
    """Claim the token for this request; if it was used before, the flow id it created."""
    db.session.add(CreateSubmission(token=token, username=username))
    try:
        db.session.commit()
        return None
    except IntegrityError:
        db.session.rollback()
    return _wait_for_flow(token)


def created_or_creating(token: str) -> bool:
    """Whether an earlier request with this token created its flow or is creating it: `claim_submission` answers a
    resend with that flow. Not one the service left unconfirmed: its resend is looked at afresh."""
    query = select(CreateSubmission.unconfirmed).where(CreateSubmission.token == token)
    unconfirmed = db.session.execute(query).scalar_one_or_none()
    return unconfirmed is not None and not unconfirmed


def _wait_for_flow(token: str) -> str:
    deadline = time.monotonic() + WAIT_FOR_FIRST
    query = select(CreateSubmission.flow_id, CreateSubmission.unconfirmed, CreateSubmission.created_at)
    while time.monotonic() < deadline:
        earlier = db.session.execute(query.where(CreateSubmission.token == token)).first()
        db.session.rollback()  # end the read so the next look sees the other request's commit
        if earlier and earlier.flow_id:
            return earlier.flow_id
        if earlier and earlier.unconfirmed:
            raise SubmissionUnconfirmed(token, earlier.created_at)
        time.sleep(0.2)
    raise SubmissionInProgress(token)


def mark_unconfirmed(token: str) -> None:
    """The service did not confirm the create: the flow may exist; a resend looks for it before sending again."""
    db.session.execute(update(CreateSubmission).where(CreateSubmission.token == token).values(unconfirmed=True))
    db.session.commit()


REFERENCE_LENGTH = CreateSubmission.reference_id.type.length


def settle_submission(token: str, flow_id: str, reference_id: str | None) -> None:
    """Record what the form created; a reference longer than the column is kept to its length."""
    reference_id = reference_id[:REFERENCE_LENGTH] if reference_id else None
    db.session.execute(
        update(CreateSubmission)
        .where(CreateSubmission.token == token)
        .values(flow_id=flow_id, reference_id=reference_id)
    )
    db.session.commit()


def forget_submission(token: str) -> None:
    """The create failed: free the token so the corrected form can be sent again."""
    db.session.execute(delete(CreateSubmission).where(CreateSubmission.token == token))
    db.session.commit()
