"""`Transaction`: the log's own transaction, lent to the tables that live beside the log.

A run's terminal event is written together with rows of other tables (the run's status, its
bill), in the transaction that appends it. Those rows are written with SQLAlchemy Core
statements, compiled here for the backend's driver (sqlite3 or psycopg) and run on the
connection that appends.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

DIALECTS: dict[str, sa.Dialect] = {
    "sqlite": sqlite.pysqlite.dialect(),
    "postgresql": postgresql.psycopg.dialect(),  # type: ignore[no-untyped-call]
}


class CompiledStatement:
    """A statement's SQL for one driver, and how to lay out its parameters."""

    __slots__ = ("defaults", "names", "sql")

    def __init__(self, statement: sa.Executable, dialect: sa.Dialect) -> None:
        # IN lists are laid out as one parameter per value (a statement made per call).
        compiled = statement.compile(  # type: ignore[attr-defined]
            dialect=dialect, compile_kwargs={"render_postcompile": True}
        )
        self.sql: str = compiled.string
        self.defaults: dict[str, Any] = dict(compiled.params)
        # sqlite3 takes "?" placeholders, in order; psycopg takes named ones.
        self.names: tuple[str, ...] | None = (
            None if compiled.positiontup is None else tuple(compiled.positiontup)
        )

    def parameters(self, given: Mapping[str, Any] | None) -> Any:
        values = self.defaults if not given else {**self.defaults, **given}
        if self.names is None:
            return values
        return [values[name] for name in self.names]


# Statements made once (with `bindparam`s for what changes) are compiled once per driver.
_COMPILED: dict[tuple[int, str], tuple[sa.Executable, CompiledStatement]] = {}
MAX_COMPILED = 512


def compiled(statement: sa.Executable, dialect: str) -> CompiledStatement:
    key = (id(statement), dialect)
    found = _COMPILED.get(key)
    if found is not None and found[0] is statement:
        return found[1]
    result = CompiledStatement(statement, DIALECTS[dialect])
    if len(_COMPILED) >= MAX_COMPILED:  # statements made per call: do not keep them all
        _COMPILED.clear()
    _COMPILED[key] = (statement, result)  # the statement is kept, so its id stays its own
    return result


class Transaction:
    """The transaction of one append, open until its callback returns."""

    def __init__(self, connection: Any, dialect: str) -> None:
        self._connection = connection
        self._dialect = dialect

    def execute(self, statement: sa.Executable, params: Mapping[str, Any] | None = None) -> Result:
        """Run a SQLAlchemy Core statement; `params` fill its `bindparam`s."""
        sql = compiled(statement, self._dialect)
        cursor = self._connection.execute(sql.sql, sql.parameters(params))
        if not cursor.description:
            return Result([], cursor.rowcount)
        record = record_type(tuple(column[0] for column in cursor.description))
        return Result([record(*row) for row in cursor.fetchall()], cursor.rowcount)


class Result:
    """What a statement wrote: its rows, where it returns any (columns are attributes), and how
    many rows it touched."""

    def __init__(self, rows: Sequence[Any], rowcount: int) -> None:
        self.rows = list(rows)
        self.rowcount = rowcount


@functools.lru_cache(maxsize=256)
def record_type(names: tuple[str, ...]) -> Any:
    """A row type whose fields are `names`, as SQLAlchemy's rows have them."""
    return collections.namedtuple("Record", names, rename=True)
