"""`flows sync`: walk the Flow Service's list into the flow index, one sync at a time across instances.

The walk follows the service's pages as the list page does (`listing.next_step`) and stops instead
of looping when the service repeats a page or a position. Pages are written while the next ones are
fetched (one writer thread; pages fetched meanwhile go in the next write together, a few at most), so
the writes hide behind the service's latency. A lease row in the database lets one instance sync at a
time: another one, from cron on another host, says so and leaves; a holder that crashed loses the lease
when it expires.
"""

import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import Flask, current_app
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError

from .. import current
from ..database import changed_rows
from ..extensions import db
from ..flowapi import FlowApiError, FlowClient, FlowPage, NotFound, ValidationFailed
from ..listing import (
    DEFAULT_LIMIT,
    NO_WAY_ON,
    SAME_POSITION,
    fingerprint,
    next_step,
    past_the_cursor,
    repeats_previous_page,
)
from ..models import FlowRecord, Lease
from .gapcheck import GAP_CHECKS, GapCheck, check_gaps
from .observations import SYNC, SYNC_DETAIL, Observation, from_detail, from_summary
from .status import archived_list_in_doubt
from .store import Applied, apply_observations, mark_gone
from .writer import utc_now

Clock = Callable[[], datetime]
LEASE_NAME = "flows-sync"
LEASE_TTL = timedelta(minutes=5)
RENEW_AFTER = timedelta(seconds=30)  # a write renews the lease once this much of it has passed
PAGE_SIZE = 100  # the most DESIGN §3 allows per page
DETAIL_CHUNK = 100  # flows fetched one by one for their names, written a hundred at a time
BUFFERED_PAGES = 10  # pages fetched ahead of a slow database at most (memory: BUFFERED_PAGES + 1 pages)
# The catch-up walk after a full sync stops at flows this much older than the sync's start, should the
# flows it knows from the first page be gone: the service's clock may differ from ours.
CATCH_UP_MARGIN = timedelta(hours=1)
CURRENT, ARCHIVED, ALL = (False,), (True,), (False, True)
LIST_NAMES = {CURRENT: "current", ARCHIVED: "archived", ALL: "current and archived"}

REPEATED, CIRCLE, NOTHING_NEW = "repeated", "circle", "nothing_new"
# A page may bring no flow not walked already (empty: a service that filters after paging), but not page after
# page: with a new next position each time, nothing else would end the walk. Flows walked are remembered as far back
# as RECENT_IDS (memory stays bounded on a list of millions).
NOTHING_NEW_IN_A_ROW = 3
RECENT_IDS = 10_000
STOP_REASONS = {
    REPEATED: "the Flow Service sent the same page again: it ignores the page position it was given",
    NOTHING_NEW: (
        f"the Flow Service sent {NOTHING_NEW_IN_A_ROW} pages in a row without a flow not walked already "
        "(empty, or repeating) while saying more flows follow"
    ),
    SAME_POSITION: "the Flow Service named the same page as the next one",
    CIRCLE: "the Flow Service led back to a page position already walked",
    NO_WAY_ON: "the Flow Service says more flows follow but gives no way to ask for them (no ids and no next link)",
}


@dataclass
class SyncReport:
    """What a sync did so far: flows seen, new, changed and gone, pages written, seconds taken."""

    lists: tuple[bool, ...]
    since: datetime | None = None
    seen: int = 0
    new: int = 0
    changed: int = 0
    gone: int | None = None  # None: not counted, for `gone_note`'s reason
    gone_note: str | None = None
    pages: int = 0
    without_id: int = 0
    details: int = 0  # flows whose own page was fetched for their name
    seconds: float = 0.0
    gaps: GapCheck | None = None  # the gap check after the walk (gapcheck)

    def count(self, applied: Applied, pages: int = 1) -> None:
        self.pages += pages
        self.seen, self.new, self.changed = (
            self.seen + len(applied.seen),
            self.new + len(applied.new),
            self.changed + len(applied.changed),
        )

    def progress(self) -> str:
        return f"seen {self.seen}, new {self.new}, changed {self.changed}, pages {self.pages}"

    def summary(self) -> str:
        since = f" created since {self.since.isoformat()}" if self.since else ""
        gone = self.gone if self.gone is not None else f"not counted ({self.gone_note})"
        line = (
            f"synced {LIST_NAMES[self.lists]} flows{since}: seen {self.seen}, new {self.new}, "
            f"changed {self.changed}, gone {gone}, pages {self.pages}, seconds {self.seconds:.1f}"
        )
        if self.details:
            line += f"; {self.details} flow page(s) fetched for names"
        if self.without_id:
            line += f"; {self.without_id} listed flow(s) had no id and could not be indexed"
        return line


class SyncLocked(Exception):
    """Another sync holds the lease: this one wrote nothing."""

    def __init__(self, holder: str | None, until: datetime | None):
        held = f"{holder}, until {until.isoformat(timespec='seconds')}" if holder and until else "released just now"
        super().__init__(f"another flows sync holds the lock ({held}); nothing was written")
        self.holder, self.until = holder, until


class SyncStopped(Exception):
    """The sync could not finish; every page fetched before is written. `error` when the service failed."""

    def __init__(self, report: SyncReport, reason: str, error: FlowApiError | None = None):
        super().__init__(reason)
        self.report, self.reason, self.error = report, reason, error


class WalkStopped(Exception):
    """The service's paging cannot be followed although more flows follow: a key of STOP_REASONS."""


class LeaseLost(Exception):
    """Another sync took the lease over (this one stalled past its expiry): stop writing."""


# -- the lease -----------------------------------------------------------------------------------


class DatabaseLease:
    """A named lock in the `leases` table, held until `expires_at` unless renewed."""

    def __init__(self, name: str, clock: Clock = utc_now, ttl: timedelta = LEASE_TTL, holder: str | None = None):
        self.name, self.clock, self.ttl = name, clock, ttl
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{os.urandom(4).hex()}"[:120]
        self.renewed_at: datetime | None = None

    def acquire(self) -> bool:
        """Take the lease if it is free or expired, in one UPDATE only one instance can win, or create it."""
        now, table = self.clock(), Lease.__table__
        held = {"holder": self.holder, "expires_at": now + self.ttl}
        free = or_(table.c.holder.is_(None), table.c.expires_at.is_(None), table.c.expires_at < now)
        try:
            if not changed_rows(table.update().where(table.c.name == self.name, free).values(held)):
                db.session.execute(table.insert().values(name=self.name, **held))
            db.session.commit()
        except IntegrityError:  # the row exists and is held, or another instance created it just now
            db.session.rollback()
            return False
        self.renewed_at = now
        return True

    def renew(self) -> None:
        """Extend the lease when a good part of it has passed; LeaseLost when another holder has it now."""
        now, table = self.clock(), Lease.__table__
        if self.renewed_at is not None and now - self.renewed_at < RENEW_AFTER:
            return
        extend = table.update().where(table.c.name == self.name, table.c.holder == self.holder)
        kept = changed_rows(extend.values(expires_at=now + self.ttl))
        db.session.commit()
        if not kept:
            raise LeaseLost(self.name)
        self.renewed_at = now

    def release(self) -> None:
        db.session.rollback()  # whatever failed before must not keep the lease from being released
        table = Lease.__table__
        mine = table.c.name == self.name, table.c.holder == self.holder
        db.session.execute(table.update().where(*mine).values(holder=None, expires_at=None))
        db.session.commit()

    def current(self) -> Lease | None:
        """The lease row as it is now (who holds it, until when)."""
        return db.session.scalar(select(Lease).where(Lease.name == self.name))


# -- the walk ------------------------------------------------------------------------------------


@dataclass
class Walk:
    """One walk through one list (current or archived), and what it found out on the way."""

    archived: bool
    since: datetime | None = None  # stop after the first page that lists a flow created before this
    known: frozenset[str] = frozenset()  # stop after the first page that lists one of these (and skip them)
    limit: int = PAGE_SIZE
    by_offset: bool = False  # followed offsets: a flow that moved during the walk may have been skipped
    current_since: datetime | None = None  # an archived walk: when this sync's walk of the current list began
    first_ids: frozenset[str] = frozenset()

    def observations(self, page: FlowPage, seen_at: datetime) -> list[Observation]:
        items = (item for item in page.items if item.id not in self.known)
        # An archived list holding the flows this sync's current walk just listed (a service ignoring the filter)
        # does not archive them.
        in_doubt = self.archived and self.current_since and archived_list_in_doubt(page, self.current_since)
        archived = None if in_doubt else self.archived
        return [observation for item in items if (observation := from_summary(item, archived, seen_at, SYNC))]

    def reached(self, page: FlowPage) -> bool:
        """Whether the walk has gone back as far as it should (`since`, or a flow it knows)."""
        older = self.since and any(item.created_at and item.created_at < self.since for item in page.items)
        return bool(older) or any(item.id in self.known for item in page.items)


def walk_pages(client: FlowClient, walk: Walk) -> Iterator[FlowPage]:
    """The list's pages, newest first; WalkStopped instead of a page already walked."""
    after: str | None = None
    at: tuple[tuple[str, str], ...] = ()
    previous: str | None = None
    asked: set[tuple[tuple[str, str | None], ...]] = set()
    walked, nothing_new_in_a_row = _RecentIds(RECENT_IDS), 0
    while True:
        page = _list_page(client, walk, after, at)
        if repeats_previous_page(after, previous, page):
            raise WalkStopped(REPEATED)
        page, _resent = past_the_cursor(after, page)
        nothing_new_in_a_row = (
            0 if walked.add_new([item.id for item in page.items if item.id]) else nothing_new_in_a_row + 1
        )
        if nothing_new_in_a_row >= NOTHING_NEW_IN_A_ROW:
            raise WalkStopped(NOTHING_NEW)
        walk.first_ids = walk.first_ids or frozenset(item.id for item in page.items if item.id)
        yield page
        if walk.reached(page):
            return
        step = next_step(page, walk.limit, at)
        if step.problem:
            raise WalkStopped(step.problem)
        if not (step.at or step.after):
            return  # the end of the list
        position = step.at or (("starting_after", step.after),)
        if position in asked:
            raise WalkStopped(CIRCLE)
        asked.add(position)
        after, at, previous = step.after, step.at, fingerprint(page)
        walk.by_offset = walk.by_offset or any(key == "offset" for key, _ in at)


def _list_page(client: FlowClient, walk: Walk, after: str | None, at: tuple[tuple[str, str], ...]) -> FlowPage:
    """A page of the walk; at its start, a page size the service refuses gives way to DESIGN's default once (the
    spec leaves the most a page may hold open)."""
    try:
        return client.list_flows(walk.limit, walk.archived, starting_after=after, position=dict(at) or None)
    except ValidationFailed:
        if after or at or walk.limit <= DEFAULT_LIMIT:
            raise
        walk.limit = DEFAULT_LIMIT
        return client.list_flows(walk.limit, walk.archived)


class _RecentIds:
    """The ids seen last, at most `size` of them."""

    def __init__(self, size: int):
        self._order: deque[str] = deque()
        self._known: set[str] = set()
        self._size = size

    def add_new(self, ids: list[str]) -> bool:
        """Remember `ids`; whether any of them was not remembered yet."""
        new = [flow_id for flow_id in dict.fromkeys(ids) if flow_id not in self._known]
        for flow_id in new:
            self._order.append(flow_id)
            self._known.add(flow_id)
            if len(self._order) > self._size:
                self._known.discard(self._order.popleft())
        return bool(new)


# -- writing while walking -----------------------------------------------------------------------


class PageWriter:
    """Writes pages in a thread of its own while the caller fetches the next ones.

    Pages fetched while a write is under way wait in a buffer and go in the next write together (up
    to BUFFERED_PAGES): fewer, larger transactions when the database is the slower side.
    """

    def __init__(self, app: Flask, lease: DatabaseLease, report: SyncReport, progress=None):
        self.app, self.lease, self.report, self.progress = app, lease, report, progress
        self.index_key = app.extensions["portal.settings"].index_key
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="flows-sync-writer")
        self._pending: Future | None = None
        self._buffer: list[Observation] = []
        self._buffered_pages = 0

    def write_walk(self, client: FlowClient, walk: Walk) -> None:
        try:
            for page in walk_pages(client, walk):
                self.report.without_id += page.items_without_id
                self._put(walk.observations(page, self.lease.clock()))
        finally:
            self._submit()  # what was fetched is written, also when the walk stopped
            self.wait()

    def wait(self) -> None:
        pending, self._pending = self._pending, None
        if pending is not None:
            self.report.count(*pending.result())
            if self.progress:
                self.progress(self.report)

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _put(self, observations: list[Observation]) -> None:
        self._buffer += observations
        self._buffered_pages += 1
        writing = self._pending is not None and not self._pending.done()
        if not writing or self._buffered_pages >= BUFFERED_PAGES:
            self._submit()

    def _submit(self) -> None:
        if not self._buffered_pages:
            return
        self.wait()
        batch, pages, self._buffer, self._buffered_pages = self._buffer, self._buffered_pages, [], 0
        self._pending = self._pool.submit(self._write, batch, pages)

    def _write(self, observations: list[Observation], pages: int) -> tuple[Applied, int]:
        with self.app.app_context():
            self.lease.renew()  # also a fence: once another sync holds the lease, this one writes nothing
            return apply_observations(observations, self.index_key), pages


# -- names from the flows' pages ---------------------------------------------------------------


def _fetch_details(client: FlowClient, lease: DatabaseLease, report: SyncReport, most: int) -> None:
    """Fetch the flows without a name in the index (newest first) and write what their pages say."""
    index_key = current.settings().index_key
    for chunk in _chunks(_flows_without_name(most), DETAIL_CHUNK):
        observations = []
        for flow_id in chunk:
            try:
                observations.append(from_detail(client.get_flow(flow_id), lease.clock(), SYNC_DETAIL))
            except NotFound:
                continue  # gone since it was listed: the next full sync marks it
        lease.renew()
        apply_observations(observations, index_key)
        report.details += len(observations)


def _flows_without_name(most: int) -> list[str]:
    if most <= 0:
        return []
    query = (
        select(FlowRecord.flow_id)
        .where(FlowRecord.last_name.is_(None), FlowRecord.gone_at.is_(None))
        .order_by(FlowRecord.created_at.desc(), FlowRecord.id.desc())
        .limit(most)
    )
    return list(db.session.scalars(query))


def _chunks(items: list, size: int) -> Iterator[list]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# -- the sync ------------------------------------------------------------------------------------


def run_sync(
    lists: tuple[bool, ...] = CURRENT,
    since: datetime | None = None,
    *,
    clock: Clock = utc_now,
    progress: Callable[[SyncReport], None] | None = None,
    limit: int = PAGE_SIZE,
    details: int = 0,
    gap_checks: int = GAP_CHECKS,
) -> SyncReport:
    """Walk `lists` (CURRENT, ARCHIVED or ALL) into the index under the sync lease; then fetch the
    retrieve response of up to `details` flows the index knows no last name for (list items carry none),
    and up to `gap_checks` flows whose webhook events seem to have missed a change (gapcheck).

    Raises SyncLocked when another sync holds the lease, SyncStopped when this one cannot finish.
    """
    app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]  # a LocalProxy, typed as Flask
    lease = DatabaseLease(LEASE_NAME, clock)
    if not lease.acquire():
        held = lease.current()
        raise SyncLocked(held.holder if held else None, held.expires_at if held else None)
    report, started, began = SyncReport(lists, since), clock(), time.monotonic()
    writer = PageWriter(app, lease, report, progress)
    try:
        _walk_and_mark_gone(app.extensions["flow_client"], writer, started, limit)
        writer.close()
        _fetch_details(app.extensions["flow_client"], lease, report, details)
        complete = started if report.gone is not None else None  # only a complete walk tells unlisted flows
        report.gaps = check_gaps(app.extensions["flow_client"], gap_checks, lease.renew, complete)
    except FlowApiError as error:
        raise SyncStopped(report, str(error), error) from None
    except WalkStopped as stop:
        raise SyncStopped(report, STOP_REASONS[str(stop)]) from None
    except LeaseLost:
        raise SyncStopped(report, "another sync took the lock over (this one stalled past its lease)") from None
    finally:
        writer.close()
        lease.release()
        report.seconds = time.monotonic() - began
    return report


def _walk_and_mark_gone(client: FlowClient, writer: PageWriter, started: datetime, limit: int) -> None:
    report = writer.report
    walks = [Walk(archived, report.since, limit=limit, current_since=started) for archived in report.lists]
    for walk in walks:  # current before archived: a flow archived meanwhile is then met in the second walk
        writer.write_walk(client, walk)
    report.gone_note = _why_gone_is_uncertain(report, walks)
    if report.gone_note is None:
        # Flows created during the walk are newer than its first page: list them before judging what is gone.
        since = started - CATCH_UP_MARGIN
        writer.write_walk(client, Walk(False, since, known=walks[0].first_ids, limit=limit))
        report.gone = mark_gone(started, None)


def _why_gone_is_uncertain(report: SyncReport, walks: list[Walk]) -> str | None:
    if report.lists != ALL:
        return "only --all walks every flow"
    if report.since:
        return "--since walks only the newest flows"
    if any(walk.by_offset for walk in walks):
        return "the Flow Service pages by offset, so a flow that moved during the walk may have been skipped"
    if report.without_id:
        return "the Flow Service listed flows without an id"
    return None
