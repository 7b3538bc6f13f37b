"""the flow list sorted by last change walks an index on the flow's last change

Revision ID: 0014_last_change_sort
Revises: 0013_audit_action_index
Create Date: 2026-11-28 05:40:00.000000

"""
from alembic import op


# revision identifiers, used by Alembic.
revision = '0014_last_change_sort'
down_revision = '0013_audit_action_index'
branch_labels = None
depends_on = None


def upgrade():
    op.create_index('ix_flow_index_last_change', 'flow_index', ['last_change_at', 'id'], unique=False)


def downgrade():
    op.drop_index('ix_flow_index_last_change', table_name='flow_index')
