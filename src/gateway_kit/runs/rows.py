"""How the run store's parts reach their rows: through the tables beside the log
(`gateway_kit.log.tables`)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from ..log import EventLog


class Rows:
    """:param log: the log whose database holds the rows."""

    def __init__(self, log: EventLog) -> None:
        self.tables = log.tables

    def _rows(self, statement: sa.Executable, params: dict[str, Any] | None = None) -> list[Any]:
        return self.tables.select(statement, params)

    def _first(self, statement: sa.Executable, params: dict[str, Any]) -> Any:
        rows = self._rows(statement, params)
        return rows[0] if rows else None
