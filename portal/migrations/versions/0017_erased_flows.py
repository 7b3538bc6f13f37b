"""a flow whose person was erased keeps its index row without the person, marked: never indexed with them again

Revision ID: 0017_erased_flows
Revises: 0016_unconfirmed_creates
Create Date: 2026-11-28 10:40:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0017_erased_flows'
down_revision = '0016_unconfirmed_creates'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('flow_index') as batch:
        batch.add_column(sa.Column('erased_at', sa.DateTime(timezone=True), nullable=True))


def downgrade():
    with op.batch_alter_table('flow_index') as batch:
        batch.drop_column('erased_at')
