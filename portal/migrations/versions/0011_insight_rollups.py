"""insights: per-quarter-hour counts and per-day decision-time histograms, a cache marked dirty by what changes

Revision ID: 0011_insight_rollups
Revises: 0010_last_change
Create Date: 2026-11-24 16:00:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0011_insight_rollups'
down_revision = '0010_last_change'
branch_labels = None
depends_on = None

# Every quarter hour some flow was created or decided in starts dirty: the first insights view sums them once.
QUARTER = {
    'postgresql': "CAST(floor(date_part('epoch', {column}) / 900) AS integer)",
    'sqlite': "CAST(strftime('%s', {column}) AS integer) / 900",
}
MARK_ALL = (
    "INSERT INTO insight_dirty (quarter, stamp)"
    " SELECT {created}, 1 FROM flow_index WHERE created_at IS NOT NULL"
    " UNION SELECT {decided}, 1 FROM flow_index WHERE decided_at IS NOT NULL"
)


def mark_all(dialect: str) -> str:
    """The statement marking every populated quarter dirty (also run by the tests and the benchmark)."""
    quarter = QUARTER[dialect].format
    return MARK_ALL.format(created=quarter(column='created_at'), decided=quarter(column='decided_at'))


def upgrade():
    counts = ['created', 'unopened', 'opened', 'accepted', 'rejected', 'opened_or_past', 'archived', 'cancelled',
              'decisions']  # fmt: skip
    op.create_table(
        'insight_quarters',
        sa.Column('quarter', sa.Integer(), autoincrement=False, nullable=False),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in counts),
        sa.PrimaryKeyConstraint('quarter'),
    )
    op.create_table(
        'insight_durations',
        sa.Column('day', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('bucket', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('flows', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('day', 'bucket'),
    )
    op.create_table(
        'insight_dirty',
        sa.Column('quarter', sa.Integer(), autoincrement=False, nullable=False),
        sa.Column('stamp', sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint('quarter'),
    )
    op.execute(mark_all(op.get_bind().dialect.name))


def downgrade():
    op.drop_table('insight_dirty')
    op.drop_table('insight_durations')
    op.drop_table('insight_quarters')
