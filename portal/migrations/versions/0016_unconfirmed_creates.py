"""create submissions the service did not confirm are marked, so a resend can look for the flow instead of waiting

Revision ID: 0016_unconfirmed_creates
Revises: 0015_name_keys_any_script
Create Date: 2026-11-28 06:10:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0016_unconfirmed_creates'
down_revision = '0015_name_keys_any_script'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('create_submissions') as batch:
        batch.add_column(sa.Column('unconfirmed', sa.Boolean(), server_default=sa.false(), nullable=False))


def downgrade():
    with op.batch_alter_table('create_submissions') as batch:
        batch.drop_column('unconfirmed')
