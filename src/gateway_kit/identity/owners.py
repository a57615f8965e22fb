"""`StreamOwners`: who owns each stream, the one the default subscription rule lets read it.

A stream's owner is declared by the wrapped app when it writes (`owned_run(..., owner=user)`,
`StreamOwners(log).declare`, or ``gateway-kit streams owner`` for data written before), or,
for a stream that holds no event yet, taken by the principal that starts its first run through
the gateway. Later declarations never change it; `set_owner` does, on purpose.

A stream that holds events and no owner is read by nobody under the default rule, and starting
a run there never makes anyone its owner: its history was written for someone the gateway does
not know.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection

import sqlalchemy as sa

from ..log import EventLog
from ..log.event import check_name
from ..log.schema import EVENTS, STREAM_LOCK_CLASS
from .tables import stream_owners
from .tokens import check_user_id

logger = logging.getLogger(__name__)

UNOWNED_WRITE = (
    "stream %r is written with no owner: nobody may read it (and no run can take it) until "
    "the app declares one: owned_run(..., owner=USER), StreamOwners(log).declare(stream, USER), "
    "or `gateway-kit streams owner STREAM USER` for what is written already"
)
SETTLED_CAPACITY = 100_000
OWNED_BY_OTHER = "stream {stream!r} is owned by {owner!r}, not {user!r}"

events = sa.table(EVENTS, sa.column("stream"))
FIND = sa.select(stream_owners.c.user_id).where(stream_owners.c.stream == sa.bindparam("stream"))
WRITTEN = sa.select(sa.literal(1)).where(events.c.stream == sa.bindparam("stream")).limit(1)
# Appends hold this lock of each stream they write until they commit (PostgreSQL): a claim
# taken under it sees every event written to the stream before, and none slips in after. SQL
# text, since SQLAlchemy has no construct for PostgreSQL's advisory locks.
DECLARE = stream_owners.insert().values(
    stream=sa.bindparam("stream"), user_id=sa.bindparam("user_id"), declared_at=sa.bindparam("now")
)
LOCK_STREAM = sa.text(f"SELECT pg_advisory_xact_lock({STREAM_LOCK_CLASS}, hashtext(:stream))")


class StreamTaken(Exception):
    """The stream got an owner or an event since it was found claimable: nothing was claimed."""


class StreamOwnedByOther(ValueError):
    """`set_owner` without force, for a stream someone else owns."""


class StreamOwners:
    def __init__(self, log: EventLog) -> None:
        self.log = log

    def owner(self, stream: str) -> str | None:
        rows = self.log.tables.select(FIND, {"stream": stream})
        return str(rows[0].user_id) if rows else None

    def owners(self, streams: Collection[str]) -> dict[str, str]:
        """The recorded owner of each of `streams` that has one, in one query."""
        if not streams:
            return {}
        statement = sa.select(stream_owners.c.stream, stream_owners.c.user_id).where(
            stream_owners.c.stream.in_(list(streams))
        )
        return {row.stream: str(row.user_id) for row in self.log.tables.select(statement)}

    def written(self, stream: str) -> bool:
        """Whether the log holds an event of `stream`."""
        return bool(self.log.tables.select(WRITTEN, {"stream": stream}))

    def claimable(self, stream: str) -> bool:
        """Whether a run's starter may take `stream`: it has neither an owner nor an event."""
        return self.owner(stream) is None and not self.written(stream)

    def declare(self, stream: str, user_id: str) -> str:
        """Make `user_id` the owner of `stream` unless it has one; the owner it has now."""
        check_name("stream", stream)
        check_user_id(user_id)
        known = self.owner(stream)
        if known is not None:
            return known
        try:
            params = {"stream": stream, "user_id": user_id, "now": time.time()}
            self.log.tables.write(DECLARE, params)
        except sa.exc.IntegrityError:
            owner = self.owner(stream)
            if owner is None:  # not a row that came first: the refusal was about something else
                raise
            return owner  # another writer declared it first: theirs stands
        return user_id

    def set_owner(self, stream: str, user_id: str, *, force: bool = False) -> str | None:
        """Make `user_id` the owner of `stream`; the owner it had (None: none).
        `StreamOwnedByOther` when another user owns it, unless `force`."""
        check_name("stream", stream)
        check_user_id(user_id)
        with self.log.tables.transaction() as conn:
            row = conn.execute(FIND, {"stream": stream}).first()
            before = None if row is None else str(row.user_id)
            if before == user_id:
                return before
            if before is not None and not force:
                raise StreamOwnedByOther(
                    OWNED_BY_OTHER.format(stream=stream, owner=before, user=user_id)
                )
            conn.execute(stream_owners.delete().where(stream_owners.c.stream == stream))
            conn.execute(
                stream_owners.insert().values(
                    stream=stream, user_id=user_id, declared_at=time.time()
                )
            )
        return before


def claim(conn: sa.Connection, stream: str, user_id: str) -> None:
    """In the caller's transaction on `conn`: make `user_id` the owner of `stream`, which must
    still hold neither an owner nor an event; `StreamTaken` otherwise (nothing written)."""
    if conn.dialect.name == "postgresql":
        conn.execute(LOCK_STREAM, {"stream": stream})
    # On SQLite the transaction holds the database's write lock from its start (BEGIN
    # IMMEDIATE): no append commits between this look and the commit.
    if conn.execute(WRITTEN, {"stream": stream}).first() is not None:
        raise StreamTaken(stream)
    if conn.execute(FIND, {"stream": stream}).first() is not None:
        raise StreamTaken(stream)
    conn.execute(
        stream_owners.insert().values(stream=stream, user_id=user_id, declared_at=time.time())
    )


class UnownedWrites:
    """Says once per stream (per process) that a stream is written with no owner."""

    def __init__(self, capacity: int = SETTLED_CAPACITY) -> None:
        self.capacity = capacity
        # Streams needing no more looks: owned (an owner is never taken away), or told.
        self._settled: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def check(self, owners: StreamOwners, stream: str, *, writing: bool = True) -> None:
        """Warn unless `stream` has an owner; `writing=False` (a refused read, say) warns only
        when the stream holds events."""
        key = (owners.log.epoch, stream)  # streams of different logs are different streams
        with self._lock:
            if key in self._settled:
                return
        owner = owners.owner(stream)
        if owner is None and not writing and not owners.written(stream):
            return  # nothing written yet: nothing to tell
        with self._lock:
            if key in self._settled:
                return
            if len(self._settled) >= self.capacity:
                self._settled.clear()  # a stream may be told of again: memory stays bounded
            self._settled.add(key)
        if owner is None:
            logger.warning(UNOWNED_WRITE, stream)


UNOWNED_WRITES = UnownedWrites()
