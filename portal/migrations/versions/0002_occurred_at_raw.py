"""webhook events keep the time as sent when it cannot be stored as a moment

Revision ID: 0002_occurred_at_raw
Revises: 0001_initial
Create Date: 2026-11-28 10:00:00.000000

"""
from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0002_occurred_at_raw'
down_revision = '0001_initial'
branch_labels = None
depends_on = None

# The range the store keeps (portal.webhooks.store): a day inside what a datetime holds.
EARLIEST = datetime(1, 1, 2, tzinfo=timezone.utc)
LATEST = datetime(9999, 12, 30, tzinfo=timezone.utc)


def upgrade():

    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('occurred_at_raw', sa.String(length=64), nullable=True))

    # Events stored before with a moment at the ends of time cannot be shown in every zone: keep it as text.
    bind = op.get_bind()
    as_text = 'occurred_at' if bind.dialect.name == 'sqlite' else 'CAST(occurred_at AS TEXT)'
    bind.execute(
        sa.text(
            f'UPDATE webhook_events SET occurred_at_raw = {as_text}, occurred_at = NULL '
            'WHERE occurred_at < :earliest OR occurred_at > :latest'
        ).bindparams(
            sa.bindparam('earliest', EARLIEST, type_=sa.DateTime(timezone=True)),
            sa.bindparam('latest', LATEST, type_=sa.DateTime(timezone=True)),
        )
    )


def downgrade():

    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.drop_column('occurred_at_raw')

