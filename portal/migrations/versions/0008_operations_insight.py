"""operations insight: consent milestones, what events told, incidents, refusal diagnoses, notifications

Revision ID: 0008_operations_insight
Revises: 0007_access_log
Create Date: 2026-11-24 14:40:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0008_operations_insight'
down_revision = '0007_access_log'
branch_labels = None
depends_on = None

FLOW_INDEX_COLUMNS = (
    ('opened_at', sa.DateTime(timezone=True)),
    ('decided_at', sa.DateTime(timezone=True)),
    ('heard_version', sa.Integer()),
    ('heard_at', sa.DateTime(timezone=True)),
    ('heard_status', sa.String(length=40)),
    ('gap_at', sa.DateTime(timezone=True)),
    ('gap_reason', sa.String(length=255)),
    ('unknown_at', sa.DateTime(timezone=True)),
    ('actions', sa.String(length=255)),
)


def upgrade():
    with op.batch_alter_table('flow_index') as batch:
        for name, kind in FLOW_INDEX_COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))
        batch.create_index('ix_flow_index_gap_at', ['gap_at'], unique=False)
    with op.batch_alter_table('rejected_deliveries') as batch:
        batch.add_column(sa.Column('diagnosis', sa.String(length=40), nullable=True))
        batch.add_column(sa.Column('diagnosis_detail', sa.String(length=255), nullable=True))
    op.create_table(
        'flow_incidents',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('flow_id', sa.String(length=100), nullable=False),
        sa.Column('incident_id', sa.String(length=255), nullable=False),
        sa.Column('task_type', sa.String(length=100), nullable=True),
        sa.Column('task_category', sa.String(length=100), nullable=True),
        sa.Column('message', sa.String(length=1000), nullable=True),
        sa.Column('source', sa.String(length=16), nullable=False),
        sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('flow_id', 'incident_id', name='uq_flow_incidents_flow_incident'),
    )
    op.create_index('ix_flow_incidents_flow_id', 'flow_incidents', ['flow_id'], unique=False)
    op.create_index('ix_flow_incidents_first_seen_at', 'flow_incidents', ['first_seen_at'], unique=False)
    op.create_index('ix_flow_incidents_open', 'flow_incidents', ['resolved_at', 'task_type', 'task_category'], unique=False)
    op.create_table(
        'notifications',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('channel', sa.String(length=16), nullable=False),
        sa.Column('kind', sa.String(length=40), nullable=False),
        sa.Column('dedupe_key', sa.String(length=255), nullable=False),
        sa.Column('flow_id', sa.String(length=100), nullable=True),
        sa.Column('subject', sa.String(length=255), nullable=False),
        sa.Column('payload', sa.Text(), nullable=False),
        sa.Column('status', sa.String(length=16), nullable=False),
        sa.Column('attempts', sa.Integer(), nullable=False),
        sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_error', sa.String(length=255), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('channel', 'dedupe_key', name='uq_notifications_channel_key'),
    )
    op.create_index('ix_notifications_due', 'notifications', ['status', 'next_attempt_at'], unique=False)
    op.create_index('ix_notifications_flow_id', 'notifications', ['flow_id'], unique=False)
    op.create_index('ix_notifications_created_at', 'notifications', ['created_at'], unique=False)
    op.create_table(
        'notification_attempts',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('notification_id', sa.Integer(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('ok', sa.Boolean(), nullable=False),
        sa.Column('detail', sa.String(length=255), nullable=True),
        sa.Column('duration_ms', sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(['notification_id'], ['notifications.id'], ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(
        'ix_notification_attempts_notification_id', 'notification_attempts', ['notification_id'], unique=False
    )


def downgrade():
    op.drop_index('ix_notification_attempts_notification_id', table_name='notification_attempts')
    op.drop_table('notification_attempts')
    for name in ('ix_notifications_created_at', 'ix_notifications_flow_id', 'ix_notifications_due'):
        op.drop_index(name, table_name='notifications')
    op.drop_table('notifications')
    for name in ('ix_flow_incidents_open', 'ix_flow_incidents_first_seen_at', 'ix_flow_incidents_flow_id'):
        op.drop_index(name, table_name='flow_incidents')
    op.drop_table('flow_incidents')
    with op.batch_alter_table('rejected_deliveries') as batch:
        batch.drop_column('diagnosis_detail')
        batch.drop_column('diagnosis')
    with op.batch_alter_table('flow_index') as batch:
        batch.drop_index('ix_flow_index_gap_at')
        for name, _ in reversed(FLOW_INDEX_COLUMNS):
            batch.drop_column(name)
