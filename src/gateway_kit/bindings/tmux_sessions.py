"""`TmuxBindings`: which tmux session drives which stream.

A stream is bound when a run of it is started for a tmux session (the run API's
``tmux_session``, `owned_run(..., tmux_session=...)`, or the `resolve_tmux_session` hook
asked about the request that started it); the latest binding wins. A bound stream's active
runs are its tmux session's work: the agent is busy while they go on. Only the user who holds
the session (`TmuxClaims`) binds streams to it: another user's run would hold its heartbeat
back.

The request path (`resolve_tmux_session`, asked on the event loop for every observed request)
reads the bindings from memory: `cached` answers from a copy of the table that `refresh`
reads again in a worker thread every few seconds, and a binding made in this process is in
it at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..log import EventLog
from ..log.per_log import HoldsLogWeakly, PerLog
from .claims import claims_of
from .tables import tmux_bindings

REFRESH_INTERVAL = 2.0
# The newest bindings held in memory at most: the bound streams of a busy deployment.
MAX_CACHED = 100_000

OF_SESSION = sa.select(tmux_bindings.c.stream).where(
    tmux_bindings.c.tmux_session == sa.bindparam("tmux_session")
)
NEWEST = (
    sa.select(tmux_bindings.c.stream, tmux_bindings.c.tmux_session)
    .order_by(tmux_bindings.c.bound_at.desc())
    .limit(MAX_CACHED)
)


def _bind_statement(dialect: Any) -> sa.Executable:
    insert = dialect.insert(tmux_bindings)
    statement: sa.Executable = insert.on_conflict_do_update(
        index_elements=[tmux_bindings.c.stream],
        set_={"tmux_session": insert.excluded.tmux_session, "bound_at": insert.excluded.bound_at},
    )
    return statement


BIND = {"sqlite": _bind_statement(sqlite), "postgresql": _bind_statement(postgresql)}


class TmuxBindings(HoldsLogWeakly):
    def __init__(self, log: EventLog) -> None:
        super().__init__(log)
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def bind(self, stream: str, tmux_session: str, user_id: str) -> None:
        """Bind `stream` to `tmux_session` (replacing an earlier binding of the stream) for
        `user_id`, who takes the session if it is free; `TmuxSessionTaken`, nothing bound, when
        another user holds it (blocking: call it in a worker thread)."""
        claims_of(self.log).claim(tmux_session, user_id)
        statement = BIND[self.log.tables.dialect]
        now = time.time()
        self.log.tables.write(
            statement, {"stream": stream, "tmux_session": tmux_session, "bound_at": now}
        )
        with self._lock:
            self._cache[stream] = tmux_session

    def streams_of(self, tmux_session: str) -> list[str]:
        """The streams bound to `tmux_session` (read from the database)."""
        rows = self.log.tables.select(OF_SESSION, {"tmux_session": tmux_session})
        return sorted(row.stream for row in rows)

    def cached(self, stream: str) -> str | None:
        """The tmux session `stream` is bound to, from memory (at most a refresh old)."""
        return self._cache.get(stream)

    def refresh(self) -> None:
        """Read the bindings, and who holds each session, again (blocking: call it in a
        worker thread)."""
        rows = self.log.tables.select(NEWEST)
        fresh = {row.stream: row.tmux_session for row in rows}
        with self._lock:
            self._cache = fresh
        claims_of(self.log).refresh()


_BINDINGS = PerLog(TmuxBindings)


def bindings_of(log: EventLog) -> TmuxBindings:
    """The one `TmuxBindings` of `log` in this process, shared by whoever binds and reads."""
    return _BINDINGS(log)
