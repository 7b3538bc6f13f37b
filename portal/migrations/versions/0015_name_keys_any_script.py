"""last names' search keys keep letters of every script and drop apostrophes: the stored keys made again

Revision ID: 0015_name_keys_any_script
Revises: 0014_last_change_sort
Create Date: 2026-11-28 05:55:00.000000

"""
import sqlalchemy as sa
from alembic import op

from portal.flowindex.keys import name_key

# revision identifiers, used by Alembic.
revision = '0015_name_keys_any_script'
down_revision = '0014_last_change_sort'
branch_labels = None
depends_on = None

BATCH = 1000
flow_index = sa.table(
    'flow_index', sa.column('id', sa.Integer), sa.column('last_name', sa.String), sa.column('last_name_key', sa.String)
)


def upgrade():
    # The portal's own key function, so the keys stored match what a search makes of what is typed; only the rows
    # whose key changes are written (names of Latin letters without an apostrophe keep theirs).
    connection = op.get_bind()
    after = 0
    while True:
        rows = connection.execute(
            sa.select(flow_index.c.id, flow_index.c.last_name, flow_index.c.last_name_key)
            .where(flow_index.c.id > after, flow_index.c.last_name.is_not(None))
            .order_by(flow_index.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            return
        changed = [
            {'row_id': row.id, 'key': name_key(row.last_name)} for row in rows if name_key(row.last_name) != row.last_name_key
        ]
        if changed:
            connection.execute(
                flow_index.update().where(flow_index.c.id == sa.bindparam('row_id')).values(last_name_key=sa.bindparam('key')),
                changed,
            )
        after = rows[-1].id


def downgrade():
    pass  # the older code's searches still find every name but those with apostrophes or letters outside a-z
