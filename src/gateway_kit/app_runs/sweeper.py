"""`OwnedRunSweeper`: ends the owned runs whose process stopped.

An owned run (`gateway_kit.app_runs.owned`) holds a lease while its process writes it. A lease that
expired unrenewed means that process is gone: the sweeper ends the run with an `Error` saying
so, in one transaction with deleting the lease, and only if the lease is still the expired one
it saw. So a writer that renewed in between keeps its run, and of several sweepers racing
(every gateway process runs one) exactly one ends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from ..coordination.periodic import Periodic
from ..coordination.tables import leases
from ..log import Event, EventLog
from ..log.event import ERROR
from ..log.transaction import Transaction
from ..settings import DEFAULT_OWNED_RUN_SWEEP_INTERVAL
from .lease_names import LEASE_PREFIX, owned_run_of

logger = logging.getLogger(__name__)

OWNER_STOPPED_ERROR = (
    "the process writing this run stopped: its lease expired at {expired_at} and was not renewed"
)


# Built once, so that a sweep (every few seconds, mostly finding nothing) compiles nothing.
EXPIRED_OWNED_LEASES = sa.select(leases).where(
    leases.c.name.startswith(LEASE_PREFIX, autoescape=True),
    leases.c.expires_at < sa.bindparam("now", type_=sa.Float),
)


class LeaseRenewed(Exception):
    """Raised inside the ending transaction to undo it: the lease is no longer the one seen."""


class OwnedRunSweeper:
    """:param log: the log whose owned runs are swept (their leases live beside it).
    :param interval: seconds between sweeps once started.
    """

    def __init__(self, log: EventLog, *, interval: float = DEFAULT_OWNED_RUN_SWEEP_INTERVAL):
        self.log = log
        self.interval = interval
        self._periodic = Periodic(self.asweep, interval, "gateway-kit-sweeper")

    def sweep(self) -> list[Event]:
        """End every owned run whose lease has expired; the `Error` events written."""
        now = time.time()
        # On the log's own reader: a look that mostly finds nothing takes no write lock, so
        # it never waits for an append (nor an append for it) on SQLite.
        expired = self.log.tables.select(EXPIRED_OWNED_LEASES, {"now": now})
        ended = []
        for lease in expired:
            event = self._end(lease, now)
            if event is not None:
                ended.append(event)
        return ended

    def _end(self, lease: Any, now: float) -> Event | None:
        owned = owned_run_of(lease.name)
        if owned is None:
            logger.warning("lease %r looks like an owned run's but names none", lease.name)
            return None
        stream, run_id = owned
        # The lease as seen, still expired: not renewed, not taken over, not swept meanwhile.
        stale = leases.delete().where(
            leases.c.name == lease.name,
            leases.c.holder == lease.holder,
            leases.c.token == lease.token,
            leases.c.expires_at < now,
        )

        def delete_lease(transaction: Transaction, events: list[Event]) -> None:
            if transaction.execute(stale).rowcount != 1:
                raise LeaseRenewed

        expired_at = datetime.fromtimestamp(lease.expires_at, UTC).isoformat(timespec="seconds")
        error = {"error": OWNER_STOPPED_ERROR.format(expired_at=expired_at)}
        try:
            event = self.log.end_run(stream, ERROR, error, run_id=run_id, also=delete_lease)
        except LeaseRenewed:
            return None
        if event is None:  # the run had ended, and its lease was left behind
            self.log.tables.write(stale)
            return None
        logger.warning("run %s of stream %s: %s", run_id, stream, error["error"])
        return event

    async def asweep(self) -> list[Event]:
        return await asyncio.to_thread(self.sweep)

    # --- in the background -----------------------------------------------------------------

    async def start(self) -> None:
        """Sweep now and every `interval` seconds, in this event loop, until `stop`."""
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()
