"""the audit log keeps why a national id was revealed

Revision ID: 0006_reveal_purpose
Revises: 0005_sessions_and_webhook_abuse
Create Date: 2026-11-23 19:00:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0006_reveal_purpose'
down_revision = '0005_sessions_and_webhook_abuse'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.add_column(sa.Column('purpose', sa.String(length=255), nullable=True))


def downgrade():
    with op.batch_alter_table('audit_log', schema=None) as batch_op:
        batch_op.drop_column('purpose')
