"""Which goose session serves each stream, and where its current goosed lifetime began.

goose names a new session after its day and how many it made that day ("20261203_7"): a goose
whose sessions database was wiped hands out ids it handed out before, which the gateway may
still have bound to another stream. goose made that session just now, so it is the asking
stream's; the other stream's binding names a session goose no longer has, and talking into it
would write into the new stream's conversation. That binding goes, and its stream starts a
session of its own on its next run; while an active run still uses it, nothing changes and the
new session is left unused (`SessionIdTaken`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..log import EventLog
from ..log.tables import Tables
from .tables import sessions

SESSION_ID_TAKEN = (
    "goose handed out session id {session_id!r} for stream {stream!r}, and that id still serves "
    "an active run of stream {holder!r}: goose's sessions were reset while that run went on. "
    "Try again once it has ended"
)
SESSION_ID_RACED = (
    "goose handed out session id {session_id!r} for stream {stream!r}, and another stream "
    "took that id at the same time: goose's sessions were reset. Try again"
)

# The reads made for every run, made once: they are compiled once per database driver.
BINDING = sa.select(sessions).where(sessions.c.stream == sa.bindparam("stream"))
BINDING_OF_SESSION = sa.select(sessions).where(sessions.c.session_id == sa.bindparam("session"))


@dataclass(frozen=True, slots=True)
class SessionBinding:
    """Which goose session serves a stream, and where its current goosed lifetime began."""

    stream: str
    session_id: str
    lifetime_start_seq: int


def _binding(row: Any) -> SessionBinding:
    return SessionBinding(row.stream, row.session_id, int(row.lifetime_start_seq))


# Built once, with bind parameters: the log's tables compile each statement once per driver.
BIND = sessions.insert().values(
    stream=sa.bindparam("stream"),
    session_id=sa.bindparam("session_id"),
    lifetime_start_seq=sa.bindparam("after"),
    created_at=sa.bindparam("now"),
)
UNBIND = sessions.delete().where(sessions.c.stream == sa.bindparam("stream"))
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


class SessionIdTaken(Exception):
    """goose handed out a session id that still serves another stream's active run."""


class SessionBindings:
    """The stream → session bindings, as the run store has them: it gives them its `tables`
    and says which sessions an active run still uses (`serves_active_run`)."""

    tables: Tables

    def serves_active_run(self, conn: sa.Connection, session_id: str) -> bool:
        """In the caller's transaction: whether an active run still uses `session_id`, so
        that the stream bound to it keeps it. Bindings know of no run; the run store does."""
        return False

    def binding(self, stream: str) -> SessionBinding | None:
        rows = self.tables.select(BINDING, {"stream": stream})
        return _binding(rows[0]) if rows else None

    def binding_of_session(self, session_id: str) -> SessionBinding | None:
        rows = self.tables.select(BINDING_OF_SESSION, {"session": session_id})
        return _binding(rows[0]) if rows else None

    def bind(self, stream: str, session_id: str, after_seq: int = 0) -> SessionBinding:
        """Bind a new goose session to `stream`, its goose ids beginning after `after_seq`; if
        another process bound one first, keep that. Another stream bound to `session_id` (a
        goose that hands out its ids again) loses it, unless an active run of it still uses
        it: `SessionIdTaken` then, and nothing is written."""
        params = {"stream": stream, "session_id": session_id, "after": after_seq}
        try:
            with self.tables.transaction() as conn:
                found = conn.execute(BINDING, {"stream": stream}).first()
                if found is not None:
                    return _binding(found)
                holder = conn.execute(BINDING_OF_SESSION, {"session": session_id}).first()
                if holder is not None:
                    # Deleted first, then its runs looked at: on PostgreSQL a run being
                    # recorded on it meanwhile holds the row (`still_bound`) until it commits,
                    # so that the look below sees it.
                    conn.execute(UNBIND, {"stream": holder.stream})
                    if self.serves_active_run(conn, session_id):
                        raise SessionIdTaken(
                            SESSION_ID_TAKEN.format(
                                session_id=session_id, stream=stream, holder=holder.stream
                            )
                        )
                conn.execute(BIND, {**params, "now": time.time()})
        except sa.exc.IntegrityError:
            pass  # bound meanwhile by another process: the binding it made is looked up below
        binding = self.binding(stream)
        if binding is None:  # the id went to another stream meanwhile: nothing was bound
            raise SessionIdTaken(SESSION_ID_RACED.format(session_id=session_id, stream=stream))
        return binding

    def still_bound(self, conn: sa.Connection, stream: str, session_id: str) -> bool:
        """In the caller's transaction: whether `stream` is still served by `session_id`,
        holding that row (PostgreSQL) until the commit, so that no `bind` moves it meanwhile."""
        statement = BINDING.with_for_update(read=True)
        row = conn.execute(statement, {"stream": stream}).first()
        return row is not None and row.session_id == session_id

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
