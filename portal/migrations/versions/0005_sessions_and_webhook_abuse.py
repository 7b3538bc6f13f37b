"""sessions that end (a per-user session version); webhook rejections tallied; pruned event ids and body hashes kept

Revision ID: 0005_sessions_and_webhook_abuse
Revises: 0004_mask_policy
Create Date: 2026-11-23 18:00:00.000000

"""
import hashlib

from alembic import op
import sqlalchemy as sa



# revision identifiers, used by Alembic.
revision = '0005_sessions_and_webhook_abuse'
down_revision = '0004_mask_policy'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('session_version', sa.Integer(), nullable=False, server_default='1'))

    with op.batch_alter_table('rejected_deliveries', schema=None) as batch_op:
        batch_op.add_column(sa.Column('known_sender', sa.Boolean(), nullable=False, server_default=sa.false()))
        batch_op.add_column(sa.Column('network', sa.String(length=64), nullable=True))
        batch_op.create_index('ix_rejected_deliveries_source_ip', ['source_ip'], unique=False)
        batch_op.create_index('ix_rejected_deliveries_network', ['network'], unique=False)

    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('body_sha256', sa.String(length=64), nullable=True))
        batch_op.create_index('ix_webhook_events_source_ip', ['source_ip'], unique=False)
    _hash_stored_hmac_bodies()
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index('ix_webhook_events_body_sha256', ['body_sha256'], unique=True)

    op.create_table(
        'rejection_tallies',
        sa.Column('kind', sa.String(length=40), nullable=False),
        sa.Column('source_ip', sa.String(length=64), nullable=False),
        sa.Column('count', sa.Integer(), nullable=False),
        sa.Column('first_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_reason', sa.String(length=255), nullable=False),
        sa.PrimaryKeyConstraint('kind', 'source_ip'),
    )
    op.create_index('ix_rejection_tallies_last_at', 'rejection_tallies', ['last_at'], unique=False)
    op.create_table(
        'pruned_webhook_events',
        sa.Column('event_id', sa.String(length=255), nullable=False),
        sa.Column('pruned_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('event_id'),
    )


def _hash_stored_hmac_bodies():
    """The hmac-sha256 events stored before: their body hashes, so that a replay of one is a duplicate too.

    The stored body is the delivered bytes decoded as UTF-8, so encoding it again gives those bytes. A body
    stored more than once (replays before this revision) keeps its hash on its first row only.
    """
    bind = op.get_bind()
    events = sa.table('webhook_events', sa.column('id'), sa.column('body'), sa.column('scheme'), sa.column('body_sha256'))
    seen, last_id = set(), 0
    while True:
        rows = bind.execute(
            sa.select(events.c.id, events.c.body)
            .where(events.c.scheme == 'hmac-sha256', events.c.id > last_id)
            .order_by(events.c.id)
            .limit(1000)
        ).all()
        if not rows:
            return
        for row_id, body in rows:
            digest = hashlib.sha256(body.encode('utf-8')).hexdigest()
            if digest not in seen:
                seen.add(digest)
                bind.execute(events.update().where(events.c.id == row_id).values(body_sha256=digest))
        last_id = rows[-1][0]


def downgrade():
    op.drop_table('pruned_webhook_events')
    op.drop_index('ix_rejection_tallies_last_at', table_name='rejection_tallies')
    op.drop_table('rejection_tallies')
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.drop_index('ix_webhook_events_body_sha256')
        batch_op.drop_index('ix_webhook_events_source_ip')
        batch_op.drop_column('body_sha256')
    with op.batch_alter_table('rejected_deliveries', schema=None) as batch_op:
        batch_op.drop_index('ix_rejected_deliveries_network')
        batch_op.drop_index('ix_rejected_deliveries_source_ip')
        batch_op.drop_column('network')
        batch_op.drop_column('known_sender')
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('session_version')
