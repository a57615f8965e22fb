"""`Transaction`: the log's own transaction, lent to the tables that live beside the log.

A run's terminal event is written together with rows of other tables (the run's status, its
bill), in the transaction that appends it. Those rows are written with SQLAlchemy Core
statements, compiled here for the backend's driver (sqlite3 or psycopg) and run on the
connection that appends.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

DIALECTS: dict[str, sa.Dialect] = {
    "sqlite": sqlite.pysqlite.dialect(),
    "postgresql": postgresql.psycopg.dialect(),  # type: ignore[no-untyped-call]
}


class Transaction:
    """The transaction of one append, open until its callback returns."""

    def __init__(self, connection: Any, dialect: str) -> None:
        self._connection = connection
        self._dialect = DIALECTS[dialect]

    def execute(self, statement: sa.Executable) -> Result:
        compiled = statement.compile(dialect=self._dialect)  # type: ignore[attr-defined]
        params: Any = compiled.params
        if compiled.positiontup is not None:  # sqlite3 takes "?" placeholders, in order
            params = [compiled.params[name] for name in compiled.positiontup]
        cursor = self._connection.execute(compiled.string, params)
        rows = cursor.fetchall() if cursor.description else []
        return Result(rows, cursor.rowcount)


class Result:
    def __init__(self, rows: Sequence[Any], rowcount: int) -> None:
        self.rows = list(rows)
        self.rowcount = rowcount

    def first(self) -> Any:
        return self.rows[0] if self.rows else None
