"""How the run store's parts read their rows: through the log's own connections when the log is
on the same database (no connection is opened per read), else through the store's engine."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..log import EventLog


class Rows:
    """:param engine: where the rows are written (and read, without a `reader`).
    :param reader: the log on the same database, whose own connections the frequent reads
        use (no connection is opened per read).
    """

    def __init__(self, engine: sa.Engine, *, reader: EventLog | None = None) -> None:
        self.engine = engine
        self.reader = reader

    def _rows(self, statement: sa.Executable, params: dict[str, Any] | None = None) -> list[Any]:
        if self.reader is not None:
            return self.reader.select(statement, params)
        with self.engine.connect() as conn:
            return list(conn.execute(statement, params or {}))

    def _first(self, statement: sa.Executable, params: dict[str, Any]) -> Any:
        rows = self._rows(statement, params)
        return rows[0] if rows else None
