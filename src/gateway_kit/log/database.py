"""SQLAlchemy engines for the tables beside the log (runs, sessions, leases).

They reach the same database as the log's own connections, an in-memory SQLite one included.
No pooling: these tables are touched a few times per run, and an unpooled connection is closed
when its work is done, even by a worker thread that outlives the log it was started for.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy import event

from ..exceptions import DatabaseUnavailable
from .reconnect import UNREACHABLE, describe

SQLITE_BUSY_TIMEOUT_MS = 60_000
CONNECT_TIMEOUT = 5  # seconds


def sqlite_engine(target: str, *, uri: bool) -> sa.Engine:
    def connect() -> sqlite3.Connection:
        return sqlite3.connect(target, uri=uri, check_same_thread=False)

    engine = sa.create_engine("sqlite://", creator=connect, poolclass=sa.NullPool)
    configure_sqlite(engine)
    return engine


def configure_sqlite(engine: sa.Engine) -> None:
    """Let SQLAlchemy, not the sqlite3 module, open transactions, and open them as writers
    (``BEGIN IMMEDIATE``): DDL is then transactional, and read-then-write never deadlocks on
    upgrading its lock; another writer waits up to the busy timeout."""

    @event.listens_for(engine, "connect")
    def _autocommit_driver(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn: sa.Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


# The driver gateway_kit installs; SQLAlchemy would otherwise pick psycopg2 for postgresql://
# and know no postgres:// at all.
POSTGRES_DRIVER = "postgresql+psycopg"


def driver_url(url: str) -> str:
    """`url` as SQLAlchemy needs it: ``postgres://`` and ``postgresql://`` name psycopg 3."""
    scheme, sep, rest = url.partition("://")
    dialect, plus, driver = scheme.partition("+")
    if not sep or dialect not in ("postgres", "postgresql"):
        return url
    return f"postgresql+{driver}://{rest}" if plus else f"{POSTGRES_DRIVER}://{rest}"


def postgres_engine(url: str, **options: Any) -> sa.Engine:
    if "connect_timeout" not in url:
        # A server that is down must not hold a caller for the system's TCP timeout.
        options.setdefault("connect_args", {}).setdefault("connect_timeout", CONNECT_TIMEOUT)
    engine = sa.create_engine(driver_url(url), poolclass=sa.NullPool, **options)

    @event.listens_for(engine, "handle_error")
    def _unavailable(context: sa.engine.ExceptionContext) -> None:
        # Every connection is new (no pool), so nothing is left to heal: the next use
        # connects again. A database that cannot be reached is told apart from a failed
        # statement, as the log's own connections tell it.
        error = context.original_exception
        if not isinstance(error, psycopg.OperationalError):
            return
        if context.is_disconnect or context.connection is None or context.connection.closed:
            raise DatabaseUnavailable(UNREACHABLE.format(error=describe(error))) from error

    return engine
