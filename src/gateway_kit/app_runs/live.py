"""`LiveOwnedRuns`: the owned runs whose writer still lives, found by their leases alone."""

from __future__ import annotations

import time
from collections.abc import Sequence

import sqlalchemy as sa

from ..coordination.tables import leases
from ..log import EventLog
from .lease_names import LEASE_PREFIX, owned_run_of

# Owned runs hold a lease named after their stream while their writer lives.
LIVE_OWNED_LEASES = sa.select(leases.c.name).where(
    leases.c.name.startswith(LEASE_PREFIX, autoescape=True),
    leases.c.expires_at >= sa.bindparam("now", type_=sa.Float),
)


class LiveOwnedRuns:
    """:param log: the log whose owned runs are read (their leases live beside it)."""

    def __init__(self, log: EventLog) -> None:
        self.log = log

    def of_streams(self, streams: Sequence[str]) -> list[tuple[str, str]]:
        """(stream, run id) of each owned run of `streams` whose lease has not run out
        (blocking: call it in a worker thread)."""
        wanted = set(streams)
        found = []
        for row in self.log.tables.select(LIVE_OWNED_LEASES, {"now": time.time()}):
            owned = owned_run_of(row.name)
            if owned is not None and owned[0] in wanted:
                found.append(owned)
        return found
