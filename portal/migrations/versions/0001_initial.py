"""initial store: users, audit log, webhook events, rejected deliveries, create submissions

Revision ID: 0001_initial
Revises: 
Create Date: 2026-11-21 20:41:26.545578

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0001_initial'
down_revision = None
branch_labels = None
depends_on = None


def upgrade():

    op.create_table('audit_log',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('username', sa.String(length=80), nullable=False),
    sa.Column('action', sa.String(length=40), nullable=False),
    sa.Column('target', sa.String(length=255), nullable=False),
    sa.Column('source_ip', sa.String(length=64), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_audit_log_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_log_target'), ['target'], unique=False)
        batch_op.create_index(batch_op.f('ix_audit_log_username'), ['username'], unique=False)

    op.create_table('create_submissions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('token', sa.String(length=64), nullable=False),
    sa.Column('username', sa.String(length=80), nullable=False),
    sa.Column('flow_id', sa.String(length=100), nullable=True),
    sa.Column('reference_id', sa.String(length=100), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token')
    )
    op.create_table('rejected_deliveries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('reason', sa.String(length=255), nullable=False),
    sa.Column('source_ip', sa.String(length=64), nullable=True),
    sa.Column('signature_headers', sa.Text(), nullable=False),
    sa.Column('body_head', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('rejected_deliveries', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rejected_deliveries_at'), ['at'], unique=False)

    op.create_table('users',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('username', sa.String(length=80), nullable=False),
    sa.Column('password_hash', sa.String(length=255), nullable=True),
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('disabled', sa.Boolean(), nullable=False),
    sa.Column('sso_subject', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_login_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('sso_subject'),
    sa.UniqueConstraint('username')
    )
    op.create_table('webhook_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('event_id', sa.String(length=255), nullable=False),
    sa.Column('event_type', sa.String(length=100), nullable=True),
    sa.Column('flow_id', sa.String(length=100), nullable=True),
    sa.Column('reference_id', sa.String(length=100), nullable=True),
    sa.Column('status', sa.String(length=40), nullable=True),
    sa.Column('occurred_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('headers', sa.Text(), nullable=False),
    sa.Column('scheme', sa.String(length=40), nullable=False),
    sa.Column('secret_index', sa.Integer(), nullable=False),
    sa.Column('source_ip', sa.String(length=64), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('event_id')
    )
    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_webhook_events_event_type'), ['event_type'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_events_flow_id'), ['flow_id'], unique=False)
        batch_op.create_index('ix_webhook_events_received', ['received_at', 'id'], unique=False)
        batch_op.create_index(batch_op.f('ix_webhook_events_reference_id'), ['reference_id'], unique=False)




def downgrade():

    with op.batch_alter_table('webhook_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_webhook_events_reference_id'))
        batch_op.drop_index('ix_webhook_events_received')
        batch_op.drop_index(batch_op.f('ix_webhook_events_flow_id'))
        batch_op.drop_index(batch_op.f('ix_webhook_events_event_type'))

    op.drop_table('webhook_events')
    op.drop_table('users')
    with op.batch_alter_table('rejected_deliveries', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rejected_deliveries_at'))

    op.drop_table('rejected_deliveries')
    op.drop_table('create_submissions')
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_audit_log_username'))
        batch_op.drop_index(batch_op.f('ix_audit_log_target'))
        batch_op.drop_index(batch_op.f('ix_audit_log_at'))

    op.drop_table('audit_log')

