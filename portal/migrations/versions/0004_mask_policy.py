"""the flow index keeps national ids masked by the new policy: the birth-date part only

Revision ID: 0004_mask_policy
Revises: 0003_flow_index
Create Date: 2026-11-23 17:00:00.000000

The old masks showed the last three characters, check digits included, and cannot be trusted. They are
rebuilt from the row's country and birth date (portal.masking's policy, written out here so that this
migration stays what it was when the policy changes): NO `DDMMYY•••••`, SE `YYMMDD-••••` or
`YYYYMMDD••••` in the form the old mask's length tells (with `-`: a `+` for the over-hundreds was hidden
too), FI `DDMMYY-••••` with the century sign of the birth year. A row without a birth date or country
(a D- or H-number stdnum could not date) becomes fully masked. Nothing of the old mask but its length is
kept, so there is no way back.

"""
from datetime import date

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0004_mask_policy'
down_revision = '0003_flow_index'
branch_labels = None
depends_on = None

MASK = '•'
CHUNK = 5000
FINNISH_CENTURY_SIGNS = {18: '+', 19: '-', 20: 'A'}

flow_index = sa.table(
    'flow_index',
    sa.column('id', sa.Integer),
    sa.column('country', sa.String),
    sa.column('birth_date', sa.Date),
    sa.column('national_id_masked', sa.String),
)


def upgrade():
    bind = op.get_bind()
    change = (
        sa.update(flow_index)
        .where(flow_index.c.id == sa.bindparam('row_id'))
        .values(national_id_masked=sa.bindparam('masked'))
    )
    last_id = 0
    while rows := _masked_rows_after(bind, last_id):
        bind.execute(change, [{'row_id': row.id, 'masked': _new_mask(row)} for row in rows])
        last_id = rows[-1].id


def downgrade():
    pass  # the old masks gave the id away: they are not brought back


def _masked_rows_after(bind, last_id: int) -> list:
    query = (
        sa.select(flow_index)
        .where(flow_index.c.id > last_id, flow_index.c.national_id_masked.is_not(None))
        .order_by(flow_index.c.id)
        .limit(CHUNK)
    )
    return list(bind.execute(query))


def _new_mask(row) -> str:
    length = len(row.national_id_masked)
    born: date | None = row.birth_date
    if born is None:
        return MASK * length
    if row.country == 'no':
        return f'{born:%d%m%y}' + MASK * 5
    if row.country == 'fi' and born.year // 100 in FINNISH_CENTURY_SIGNS:
        return f'{born:%d%m%y}' + FINNISH_CENTURY_SIGNS[born.year // 100] + MASK * 4
    if row.country == 'se':
        return _swedish_mask(born, length)
    return MASK * length


def _swedish_mask(born: date, length: int) -> str:
    """YYMMDD••••, YYMMDD-••••, YYYYMMDD•••• or YYYYMMDD-••••: the form the id was written in (10 to 13 long)."""
    written_date = f'{born:%Y%m%d}' if length >= 12 else f'{born:%y%m%d}'
    return written_date + ('-' if length in (11, 13) else '') + MASK * 4
