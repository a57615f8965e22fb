"""A SQLite database file a command may have made by starting, removed again when it failed.

`gateway-kit serve` imports the app's module before it knows whether it can serve it, and a
module that builds its `Gateway` over ``EventLog($GATEWAY_KIT_DB)`` creates and migrates the
database as it is imported. When the start then fails, the file it made is not left behind.
Only a file that did not exist when the command began goes, with its journal files, and only
while it holds no event: a file someone else has written to meanwhile is never touched.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from ..log.schema import EVENTS

logger = logging.getLogger(__name__)

# The files SQLite keeps beside a database (write-ahead log, shared memory, rollback journal).
COMPANIONS = ("", "-wal", "-shm", "-journal")
KEPT = "kept %s, made by a start that failed: %s"


def sqlite_file(url: str) -> Path | None:
    """The database file a SQLite `url` names; None for any other database, or one in memory."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError:
        return None
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


class FreshSqliteFile:
    """The SQLite file of `url` as it was when made: `discard` removes it if it did not exist
    then, now exists, and holds no event."""

    def __init__(self, url: str) -> None:
        self.path = sqlite_file(url)
        self.existed = self.path is None or any(self._paths(existing_only=True))

    def _paths(self, *, existing_only: bool) -> list[Path]:
        if self.path is None:
            return []
        paths = [Path(f"{self.path}{suffix}") for suffix in COMPANIONS]
        return [p for p in paths if p.exists()] if existing_only else paths

    def discard(self) -> None:
        if self.existed or self.path is None or not self.path.exists():
            return
        reason = self._written()
        if reason is not None:
            logger.info(KEPT, self.path, reason)
            return
        for path in self._paths(existing_only=True):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)

    def _written(self) -> str | None:
        """Why the file must stay (something holds events, or it cannot be read), or None."""
        assert self.path is not None  # `discard` looks only at a file it knows
        try:
            uri = f"{self.path.absolute().as_uri()}?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
                tables = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (EVENTS,)
                ).fetchone()
                if tables is None:
                    return None
                if conn.execute(f"SELECT 1 FROM {EVENTS} LIMIT 1").fetchone() is not None:
                    return "it holds events"
        except sqlite3.Error as exc:
            return str(exc)
        return None
