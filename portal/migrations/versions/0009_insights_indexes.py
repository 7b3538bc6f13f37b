"""insights: the flows created in a range counted from one index (index-only on PostgreSQL), decisions by day

Revision ID: 0009_insights_indexes
Revises: 0008_operations_insight
Create Date: 2026-11-24 15:00:00.000000

"""
from alembic import op

# revision identifiers, used by Alembic.
revision = '0009_insights_indexes'
down_revision = '0008_operations_insight'
branch_labels = None
depends_on = None

# What the insights page counts of each flow created in a range: read from the index alone on PostgreSQL.
INSIGHT_COLUMNS = ['consent_status', 'opened_at', 'decided_at', 'archived', 'lifecycle']


def upgrade():
    op.create_index('ix_flow_index_insights', 'flow_index', ['created_at'], postgresql_include=INSIGHT_COLUMNS)
    op.create_index('ix_flow_index_decided', 'flow_index', ['decided_at'])


def downgrade():
    op.drop_index('ix_flow_index_decided', table_name='flow_index')
    op.drop_index('ix_flow_index_insights', table_name='flow_index')
