"""stuck flows: each flow's last change stored (flow_index.last_change_at), with an index of the flows not done

Revision ID: 0010_last_change
Revises: 0009_insights_indexes
Create Date: 2026-11-24 15:30:00.000000

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0010_last_change'
down_revision = '0009_insights_indexes'
branch_labels = None
depends_on = None

# The rule the index writer keeps (portal/flowindex/store.py): the service's updatedAt unless it is older
# than the opening the index knows of, else the opening, else the creation, else when the portal first saw it.
BACKFILL = (
    "UPDATE flow_index SET last_change_at = CASE"
    " WHEN updated_at IS NOT NULL AND (opened_at IS NULL OR updated_at >= opened_at) THEN updated_at"
    " ELSE COALESCE(opened_at, created_at, changed_at) END"
)

# A flow not done (portal/worklists.py `_not_done`), written as SQLAlchemy renders it on each database, so that
# the stuck list's WHERE matches the index's (SQLite matches terms as written, and writes true and false as 1 and 0).
NOT_DONE = (
    "coalesce(consent_status, 'Unopened') IN ('Unopened', 'Opened')"
    " AND (coalesce(lifecycle, '') NOT IN ('completed', 'cancelled'))"
    " AND archived IS NOT {true} AND gone_at IS NULL AND unknown_at IS NULL AND stub IS {false}"
)
POSTGRESQL_NOT_DONE = NOT_DONE.format(true='true', false='false')
SQLITE_NOT_DONE = NOT_DONE.format(true='1', false='0')


def upgrade():
    # One statement: on PostgreSQL the new column is nullable with no default (no table rewrite to add it),
    # and a single UPDATE of a million rows takes seconds; the index is built after it, once.
    with op.batch_alter_table('flow_index') as batch:
        batch.add_column(sa.Column('last_change_at', sa.DateTime(timezone=True), nullable=True))
    op.execute(BACKFILL)
    op.create_index(
        'ix_flow_index_not_done_change',
        'flow_index',
        ['last_change_at', 'id'],
        postgresql_where=sa.text(POSTGRESQL_NOT_DONE),
        sqlite_where=sa.text(SQLITE_NOT_DONE),
    )


def downgrade():
    op.drop_index('ix_flow_index_not_done_change', table_name='flow_index')
    with op.batch_alter_table('flow_index') as batch:
        batch.drop_column('last_change_at')
