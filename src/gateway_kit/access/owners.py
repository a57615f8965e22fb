"""`StreamOwners`: who owns each stream, the one the default subscription rule lets read it.

A stream's owner is the first user declared for it: the principal that started its first run
through the gateway, or the user the wrapped app names when it writes (the legacy task thread
knows its user). Later declarations never change it.
"""

from __future__ import annotations

import time

import sqlalchemy as sa

from ..log import EventLog
from ..log.event import check_name
from .tables import stream_owners
from .tokens import check_user_id


class StreamOwners:
    def __init__(self, log: EventLog) -> None:
        self.log = log
        self._find = sa.select(stream_owners.c.user_id).where(
            stream_owners.c.stream == sa.bindparam("stream")
        )

    def owner(self, stream: str) -> str | None:
        rows = self.log.select(self._find, {"stream": stream})
        return str(rows[0].user_id) if rows else None

    def declare(self, stream: str, user_id: str) -> str:
        """Make `user_id` the owner of `stream` unless it has one; the owner it has now."""
        check_name("stream", stream)
        check_user_id(user_id)
        known = self.owner(stream)
        if known is not None:
            return known
        try:
            with self.log.engine.begin() as conn:
                conn.execute(
                    stream_owners.insert().values(
                        stream=stream, user_id=user_id, declared_at=time.time()
                    )
                )
        except sa.exc.IntegrityError:
            owner = self.owner(stream)
            if owner is None:  # not a row that came first: the refusal was about something else
                raise
            return owner  # another writer declared it first: theirs stands
        return user_id
