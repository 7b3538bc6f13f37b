"""the audit log's action filter by index: its choices and a rare action's page

Revision ID: 0013_audit_action_index
Revises: 0012_user_language
Create Date: 2026-11-28 02:30:00.000000

"""
from alembic import op


# revision identifiers, used by Alembic.
revision = '0013_audit_action_index'
down_revision = '0012_user_language'
branch_labels = None
depends_on = None


def upgrade():
    op.create_index('ix_audit_log_action', 'audit_log', ['action', 'id'], unique=False)


def downgrade():
    op.drop_index('ix_audit_log_action', table_name='audit_log')
