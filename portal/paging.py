"""Keyset paging of the portal's own tables: newest first, by row id, stable while rows arrive."""

from dataclasses import dataclass

from .extensions import db

MAX_ROW_ID = 2**31 - 1  # ids are 32-bit integers on PostgreSQL


@dataclass(frozen=True)
class KeysetPage:
    rows: list
    next_before: int | None  # the `before` of the next (older) page, None on the last one


def newest_first(query, model, before: int | None, limit: int) -> KeysetPage:
    """One page of `query`'s rows with ids below `before`, newest first."""
    if before:
        query = query.where(model.id < before)
    rows = list(db.session.scalars(query.order_by(model.id.desc()).limit(limit + 1)))
    return KeysetPage(rows[:limit], rows[limit - 1].id if len(rows) > limit else None)


def before_argument(raw: str | None) -> int | None:
    """A usable `before` query value, or None."""
    raw = (raw or "").strip()
    if raw.isascii() and raw.isdigit() and 0 < int(raw) <= MAX_ROW_ID:
        return int(raw)
    return None
