"""`TmuxClaims`: which user holds each tmux session.

Typing into a pane acts on someone's agent, so the gateway must know whose agent it is. A tmux
session is held by one user, who takes it by starting a run for it (the run API's
``tmux_session``, `owned_run(..., tmux_session=...)`) or by `claim`: the first claim of a
free session takes it, later claims by the same user keep it, anyone else's is refused
(`TmuxSessionTaken`). What the holder's principal does is the session's traffic; an
unauthenticated request, or another user's, never changes its execution state, never binds a
stream to it, and never reads its heartbeat.

The request path asks `holder` for every observed request, on the event loop: it answers from
memory, a copy of the table that `refresh` reads again in a worker thread every few seconds; a
claim made in this process is in it at once.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..exceptions import TmuxSessionTaken
from ..log import EventLog
from ..log.per_log import HoldsLogWeakly, PerLog
from ..principal import principal_of
from ..types import Scope
from .tables import claims

# The sessions one user may hold: claims are rows anyone with an account can add.
DEFAULT_MAX_PER_USER = 64
# The newest claims held in memory at most: the agents of a busy deployment.
MAX_CACHED = 100_000

TAKEN = "tmux session {tmux_session!r} is held by another user"
TOO_MANY = "user {user_id!r} holds {count} tmux sessions, the most one user may hold"

HOLDER = sa.select(claims.c.user_id).where(claims.c.tmux_session == sa.bindparam("tmux_session"))
HELD_BY = sa.select(sa.func.count()).where(claims.c.user_id == sa.bindparam("user_id"))
NEWEST = (
    sa.select(claims.c.tmux_session, claims.c.user_id)
    .order_by(claims.c.claimed_at.desc())
    .limit(MAX_CACHED)
)
RELEASE = claims.delete().where(claims.c.tmux_session == sa.bindparam("tmux_session"))


def _claim_statement(dialect: Any) -> sa.Executable:
    # A free session is taken; a held one is left as it is (the holder is read back).
    statement: sa.Executable = dialect.insert(claims).on_conflict_do_nothing(
        index_elements=[claims.c.tmux_session]
    )
    return statement


CLAIM = {"sqlite": _claim_statement(sqlite), "postgresql": _claim_statement(postgresql)}


class TmuxClaims(HoldsLogWeakly):
    def __init__(self, log: EventLog, *, max_per_user: int = DEFAULT_MAX_PER_USER) -> None:
        super().__init__(log)
        self.max_per_user = max_per_user
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def claim(self, tmux_session: str, user_id: str) -> None:
        """Take `tmux_session` for `user_id`, or keep it; `TmuxSessionTaken` when another user
        holds it or `user_id` holds the most sessions one user may (blocking: call it in a
        worker thread)."""
        tables = self.log.tables
        with tables.transaction() as conn:
            holder = conn.execute(HOLDER, {"tmux_session": tmux_session}).scalar()
            if holder is None:
                count = conn.execute(HELD_BY, {"user_id": user_id}).scalar() or 0
                if count >= self.max_per_user:
                    raise TmuxSessionTaken(TOO_MANY.format(user_id=user_id, count=count))
                row = {"tmux_session": tmux_session, "user_id": user_id, "claimed_at": time.time()}
                conn.execute(CLAIM[tables.dialect], row)
                # Another process may have taken it between the read and the insert.
                holder = conn.execute(HOLDER, {"tmux_session": tmux_session}).scalar()
        with self._lock:
            self._cache[tmux_session] = str(holder)
        if holder != user_id:
            raise TmuxSessionTaken(TAKEN.format(tmux_session=tmux_session))

    def holder(self, tmux_session: str) -> str | None:
        """The user holding `tmux_session`, read from the database."""
        rows = self.log.tables.select(HOLDER, {"tmux_session": tmux_session})
        return str(rows[0].user_id) if rows else None

    def cached(self, tmux_session: str) -> str | None:
        """The user holding `tmux_session`, from memory (at most a refresh old)."""
        return self._cache.get(tmux_session)

    def speaks_for(self, scope: Scope, tmux_session: str) -> bool:
        """Whether the request of `scope` is its holder's (from memory): only then does it
        count toward `tmux_session`'s execution state."""
        principal = principal_of(scope)
        return principal is not None and self._cache.get(tmux_session) == principal.user_id

    def release(self, tmux_session: str) -> None:
        """Free `tmux_session`, so that anyone may take it."""
        self.log.tables.write(RELEASE, {"tmux_session": tmux_session})
        with self._lock:
            self._cache.pop(tmux_session, None)

    def refresh(self) -> None:
        """Read the claims again (blocking: call it in a worker thread)."""
        rows = self.log.tables.select(NEWEST)
        fresh = {row.tmux_session: row.user_id for row in rows}
        with self._lock:
            self._cache = fresh


_CLAIMS = PerLog(TmuxClaims)


def claims_of(log: EventLog) -> TmuxClaims:
    """The one `TmuxClaims` of `log` in this process, shared by whoever claims and reads."""
    return _CLAIMS(log)
