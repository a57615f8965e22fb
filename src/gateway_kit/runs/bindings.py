"""Which goose session serves each stream, and where its current goosed lifetime began."""

from __future__ import annotations

import contextlib
import time
from typing import Any

import sqlalchemy as sa

from ..log import EventLog
from .model import SessionBinding
from .rows import Rows
from .tables import sessions

# The reads made for every run, made once: they are compiled once per database driver.
BINDING = sa.select(sessions).where(sessions.c.stream == sa.bindparam("stream"))
BINDING_OF_SESSION = sa.select(sessions).where(sessions.c.session_id == sa.bindparam("session"))


def _binding(row: Any) -> SessionBinding:
    return SessionBinding(row.stream, row.session_id, int(row.lifetime_start_seq))


# Built once, with bind parameters: the log's tables compile each statement once per driver.
BIND = sessions.insert().values(
    stream=sa.bindparam("stream"),
    session_id=sa.bindparam("session_id"),
    lifetime_start_seq=0,
    created_at=sa.bindparam("now"),
)
REBIND = (
    sessions.update()
    .where(sessions.c.stream == sa.bindparam("stream"))
    .values(session_id=sa.bindparam("session_id"), lifetime_start_seq=sa.bindparam("after"))
)
START_LIFETIME = (
    sessions.update()
    .where(sessions.c.session_id == sa.bindparam("session_id"))
    .where(sessions.c.lifetime_start_seq < sa.bindparam("after"))
    .values(lifetime_start_seq=sa.bindparam("after"))
)


class SessionBindings(Rows):
    """The stream → session bindings of the run store."""

    def binding(self, stream: str) -> SessionBinding | None:
        row = self._first(BINDING, {"stream": stream})
        return None if row is None else _binding(row)

    def binding_of_session(self, session_id: str) -> SessionBinding | None:
        row = self._first(BINDING_OF_SESSION, {"session": session_id})
        return None if row is None else _binding(row)

    def bind(self, stream: str, session_id: str) -> SessionBinding:
        """Bind a new goose session to `stream`; if another process bound one first, keep that."""
        with contextlib.suppress(sa.exc.IntegrityError):
            params = {"stream": stream, "session_id": session_id, "now": time.time()}
            self.tables.write(BIND, params)
        binding = self.binding(stream)
        assert binding is not None
        return binding

    def rebind(self, stream: str, session_id: str, after_seq: int) -> SessionBinding:
        """Serve `stream` from a new goose session from now on; its goose ids begin after
        `after_seq`, and the old session's pump, finding no binding, stops."""
        self.tables.write(REBIND, {"stream": stream, "session_id": session_id, "after": after_seq})
        binding = self.binding(stream)
        assert binding is not None
        return binding

    def start_lifetime(self, session_id: str, after_seq: int) -> None:
        """goosed restarted: goose ids of events up to `after_seq` must never be sent again."""
        self.tables.write(START_LIFETIME, {"session_id": session_id, "after": after_seq})


async def lifetime_head(log: EventLog, stream: str) -> int:
    """Where a new goose lifetime of `stream` begins: after its newest committed event,
    settled or not. The settled head of PostgreSQL lags while an older transaction runs
    anywhere on the server, and the old lifetime's goose ids above it would be sent again."""
    newest = await log.alatest(stream)
    return 0 if newest is None else newest.seq
