"""Engine set-up the store needs on every connection, and where the migrations live."""

import sqlite3
from pathlib import Path

from flask import Flask
from sqlalchemy import event
from sqlalchemy.engine import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


@event.listens_for(Engine, "connect")
def _tune_sqlite(dbapi_connection, _record) -> None:
    """WAL lets readers work beside the one writer; busy_timeout makes workers wait, not fail."""
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=10000")
        cursor.execute("PRAGMA synchronous=FULL")  # a committed event survives a power loss too
        cursor.close()


def configure_engine(app: Flask) -> None:
    """Make sure the folder of a SQLite file exists before the first connection."""
    url = app.config["SQLALCHEMY_DATABASE_URI"]
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
