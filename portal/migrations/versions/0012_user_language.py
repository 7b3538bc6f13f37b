"""an account keeps the language its person chose for the pages

Revision ID: 0012_user_language
Revises: 0011_insight_rollups
Create Date: 2026-11-24 10:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0012_user_language'
down_revision = '0011_insight_rollups'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.add_column(sa.Column('language', sa.String(length=8), nullable=True))


def downgrade():
    with op.batch_alter_table('users', schema=None) as batch_op:
        batch_op.drop_column('language')
