"""`Tables`: the one way every store reaches the tables beside the log (runs, sessions, bills,
tokens, owners, tickets, leases, presence), as `log.tables`.

A store says what it needs, and each need goes where it is cheapest and safe:

- `select`: one statement's rows, on the log's reader connection of the calling thread (none
  is opened per read): the frequent reads (a run, a token, who watches a stream) cost a query.
- `write`: one statement committed on its own, on the log's writer connection in turn with the
  appends (none is opened per write).
- `transaction`: several statements that must hold together (a read then a write, a lock taken
  first), on a connection of their own from a SQLAlchemy engine. On SQLite it begins with
  ``BEGIN IMMEDIATE``, so the transaction holds the write lock from its first statement and a
  read-then-write never deadlocks upgrading it; on PostgreSQL a store may take there the
  advisory or table locks that last until the commit.

Statements are SQLAlchemy Core; `select` and `write` compile them once per driver
(`transaction.py`). Whichever way it went, a failed statement raises SQLAlchemy's exception of
its kind (a refused duplicate is ``sa.exc.IntegrityError``), so a store catches one thing.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import psycopg
import sqlalchemy as sa

from .backend import Backend
from .transaction import Result, compiled, record_type

DRIVER_ERRORS = (sqlite3.Error, psycopg.Error)


class Tables:
    """:param backend: the log's database, whose connections `select` and `write` use.
    :param write_lock: the log's write lock, which the writer connection is used under.
    :param check_open: raises `LogClosed` once the log is closed.
    """

    def __init__(
        self, backend: Backend, write_lock: threading.Lock, check_open: Callable[[], None]
    ) -> None:
        self._backend = backend
        self._write_lock = write_lock
        self._check_open = check_open
        self._engine: sa.Engine | None = None
        self._engine_lock = threading.Lock()

    @property
    def dialect(self) -> str:
        """The database's kind, as SQLAlchemy names it: "sqlite" or "postgresql"."""
        return self._backend.dialect

    def select(
        self, statement: sa.Executable, params: Mapping[str, Any] | None = None
    ) -> list[Any]:
        """The rows of a query, read on this thread's reader connection; each row's columns are
        attributes. `params` fill the statement's `bindparam`s."""
        self._check_open()
        sql = compiled(statement, self.dialect)
        try:
            names, rows = self._backend.select(sql.sql, sql.parameters(params))
        except DRIVER_ERRORS as exc:
            raise _sqlalchemy_error(sql.sql, params, exc) from exc
        record = record_type(names)
        return [record(*row) for row in rows]

    def write(self, statement: sa.Executable, params: Mapping[str, Any] | None = None) -> Result:
        """Run one statement, committed on its own, on the log's writer connection; its rows,
        where it returns any (with their columns as attributes). `params` fill the statement's
        `bindparam`s."""
        self._check_open()
        try:
            with self._write_lock:
                return self._backend.transact(
                    lambda transaction: transaction.execute(statement, params)
                )
        except DRIVER_ERRORS as exc:
            raise _sqlalchemy_error(str(statement), params, exc) from exc

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sa.Connection]:
        """A transaction for several statements, committed when the block ends (rolled back if
        it raises). It must not call `write` (which may wait for this transaction's locks)."""
        with self.engine.begin() as conn:
            yield conn

    @property
    def engine(self) -> sa.Engine:
        """The SQLAlchemy engine of `transaction`, also for tools that look at the tables."""
        self._check_open()
        with self._engine_lock:
            if self._engine is None:
                self._engine = self._backend.engine()
            return self._engine

    def close(self) -> None:
        with self._engine_lock:
            if self._engine is not None:
                self._engine.dispose()


def _sqlalchemy_error(
    sql: str, params: Mapping[str, Any] | None, error: Exception
) -> sa.exc.StatementError:
    base = sqlite3.Error if isinstance(error, sqlite3.Error) else psycopg.Error
    return sa.exc.DBAPIError.instance(sql, params, error, base)
