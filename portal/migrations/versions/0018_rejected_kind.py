"""a kept sample of a refused delivery names its reason's kind, so the page's reason filter applies to samples too

Revision ID: 0018_rejected_kind
Revises: 0017_erased_flows
Create Date: 2026-11-28 10:50:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0018_rejected_kind'
down_revision = '0017_erased_flows'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('rejected_deliveries') as batch:
        batch.add_column(sa.Column('kind', sa.String(length=40), nullable=True))


def downgrade():
    with op.batch_alter_table('rejected_deliveries') as batch:
        batch.drop_column('kind')
