"""Engine set-up the store needs on every connection, its timeouts, and where the migrations live."""

import contextlib
import fcntl
import functools
import logging
import math
import sqlite3
from pathlib import Path
from typing import Any, cast

from flask import Flask, g
from sqlalchemy import Column, Select, event, func, select
from sqlalchemy.engine import CursorResult, Engine, make_url
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.sql import Executable

from . import metrics
from .extensions import db
from .settings import Settings

MIGRATIONS = Path(__file__).with_name("migrations")
# Connection-type failures: the database is down, hung, locked or out of pooled connections.
UNAVAILABLE = (OperationalError, InterfaceError, PoolTimeout)
UNDEFINED_TABLE = "42P01"

log = logging.getLogger(__name__)


def distinct_values(column: Column[Any], most: int) -> list[Any]:
    """The column's distinct values other than NULL, in order, at most `most`: for a filter's choices.

    A walk of the column's index from one value to the next (a recursive query, one index seek a value), not a
    DISTINCT over every row: on a table of millions that scan took a second on every page that offers the choice.
    """
    return [value for value in db.session.scalars(_distinct_walk(column, most)) if value is not None]


@functools.cache
def _distinct_walk(column: Column[Any], most: int) -> Select[Any]:
    """Built once per column: building it costs more than running it."""
    table = column.table
    following = table.alias().c[column.key]
    first = select(func.min(column).label("value")).cte(f"{table.name}_{column.key}_values", recursive=True)
    after = select(func.min(following)).where(following > first.c.value).scalar_subquery()
    values = first.union_all(select(after).where(first.c.value.is_not(None)))
    return select(values.c.value).where(values.c.value.is_not(None)).limit(most)


def changed_rows(statement: Executable) -> int:
    """Run an UPDATE or DELETE in the session; how many rows it changed.

    Session.execute is typed as returning a plain Result, which has no rowcount; for DML it is a CursorResult.
    """
    return cast(CursorResult[Any], db.session.execute(statement)).rowcount


class DatabaseUnavailable(Exception):
    """The database failed earlier in this request; raised where carrying on would mislead."""


def _tune_sqlite(dbapi_connection: sqlite3.Connection, _record) -> None:
    """WAL lets readers work beside the one writer; the busy timeout comes from `engine_options`."""
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=FULL")  # a committed event survives a power loss too
    cursor.close()


def engine_options(settings: Settings) -> dict:
    """SQLAlchemy engine options that bound every wait on the database by the two timeout settings."""
    url = make_url(settings.database_url)
    # hide_parameters: a failed statement's error (and so a log line) never carries the values, e.g. a national id
    # No ping on every checkout (a round trip each time, 28 % of a webhook thread's time on PostgreSQL): a
    # connection is renewed after 5 minutes, and one the server dropped fails its statement, which invalidates
    # the pool (SQLAlchemy does that on a disconnect error), answers 503 and is fresh on the next request.
    options: dict = {"pool_pre_ping": False, "pool_recycle": 300, "hide_parameters": True}
    if url.get_backend_name() == "sqlite":
        # sqlite3's `timeout` is SQLite's busy timeout: how long a statement waits for another writer's
        # lock, the one way a local file keeps a worker waiting.
        options["connect_args"] = {"timeout": settings.db_statement_timeout}
        if url.database and url.database != ":memory:":
            options["pool_timeout"] = settings.db_connect_timeout  # in-memory databases use a pool without it
    elif url.get_backend_name() == "postgresql":
        connect = math.ceil(settings.db_connect_timeout)
        statement_ms = math.ceil(settings.db_statement_timeout * 1000)
        options["pool_timeout"] = settings.db_connect_timeout
        options["connect_args"] = {
            # psycopg enforces connect_timeout itself (at least 2 s), also against a server that accepts
            # the TCP connection and then never speaks: tests/test_database_faults.py measures it.
            "connect_timeout": connect,
            "options": f"-c statement_timeout={statement_ms}",
            # statement_timeout is the server's own clock; against a peer that vanished from the network,
            # keepalives and tcp_user_timeout make the kernel give up on the socket.
            "keepalives": 1,
            "keepalives_idle": max(1, math.ceil(settings.db_statement_timeout)),
            "keepalives_interval": connect,
            "keepalives_count": 3,
            "tcp_user_timeout": statement_ms + connect * 1000,
        }
    return options


@contextlib.contextmanager
def _sqlite_writer_lock(path: str):
    """One background writer at a time across the threads and processes that share a SQLite file.

    SQLite's busy handler polls for a held lock, sleeping up to 100 ms between tries: under load that is
    where the long waits came from. Writers that take this lock first wait in the kernel (flock) and go
    the moment it is released; any other writer (a page, a command) still has the busy timeout. Each use
    opens the file anew: flock excludes every other open of it, in this process too.
    """
    try:
        lock_file = open(path, "a+b")  # noqa: SIM115 - closed below, which releases the lock
    except OSError as error:  # the database's folder is gone or unwritable: the database is, too
        raise DatabaseUnavailable(f"the SQLite writer lock cannot be taken: {error.strerror}") from None
    with lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        yield


def writer_lock(engine: Engine):
    """The lock a background writer holds around a write transaction on a SQLite file; none on other databases."""
    url = engine.url
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return contextlib.nullcontext()
    return _sqlite_writer_lock(_lock_path(url.database))


@functools.cache
def _lock_path(database: str) -> str:
    """The lock file beside the database, its path resolved once (each batch of a writer takes the lock)."""
    return str(Path(database).resolve()) + "-writer.lock"


def configure_engine(app: Flask) -> None:
    """SQLite: the file's folder exists and every connection of this app's engine (only this one's) is tuned."""
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    if not url.startswith("sqlite:"):
        return
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    with app.app_context():
        event.listen(db.engine, "connect", _tune_sqlite)  # before the engine's first connection


def is_unavailable(error: BaseException) -> bool:
    """Whether `error` says the database cannot be reached or did not answer in time."""
    if isinstance(error, (DatabaseUnavailable, *UNAVAILABLE)):
        return True
    # PostgreSQL's undefined table (SQLite says so with an OperationalError): a database never migrated is as
    # unusable as one away, and its page says so (503, /readyz "not_migrated"), not an unexpected error (500)
    return isinstance(error, DBAPIError) and (
        error.connection_invalidated or getattr(error.orig, "sqlstate", None) == UNDEFINED_TABLE
    )


def mark_unavailable(error: BaseException) -> None:
    """Roll the session back so this thread's next request starts clean, and remember the failure."""
    if not getattr(g, "database_unavailable", False):
        report_unavailable(error)
    g.database_unavailable = True
    try:
        db.session.rollback()
    except Exception:  # a rollback on a dead connection may fail too; the session is discarded at teardown
        log.debug("rollback after a database failure failed", exc_info=True)


def report_unavailable(error: BaseException) -> None:
    """Log (the driver's words, never the statement's parameters) and count a database failure."""
    origin = getattr(error, "orig", None) or error
    first_line = (str(origin).strip().splitlines() or [""])[0][:200]
    log.warning("database unavailable: %s: %r", type(origin).__name__, first_line)
    metrics.count_db_error(error)


def database_unavailable() -> bool:
    """Whether the database failed earlier in this request."""
    return bool(g.get("database_unavailable"))
