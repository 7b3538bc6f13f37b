"""the per-person access log: every look at a person's data under their pseudonymous subject key

Revision ID: 0007_access_log
Revises: 0006_reveal_purpose
Create Date: 2026-11-23 19:10:00.000000

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0007_access_log'
down_revision = '0006_reveal_purpose'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'access_log',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('subject_key', sa.String(length=64), nullable=False),
        sa.Column('username', sa.String(length=80), nullable=False),
        sa.Column('kind', sa.String(length=40), nullable=False),
        sa.Column('target', sa.String(length=255), nullable=False),
        sa.Column('purpose', sa.String(length=255), nullable=True),
        sa.Column('source_ip', sa.String(length=64), nullable=True),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_access_log_at', 'access_log', ['at'], unique=False)
    op.create_index('ix_access_log_subject', 'access_log', ['subject_key', 'id'], unique=False)


def downgrade():
    op.drop_index('ix_access_log_subject', table_name='access_log')
    op.drop_index('ix_access_log_at', table_name='access_log')
    op.drop_table('access_log')
