"""Every session pump of one gateway process, and the scan that adopts orphaned sessions.

A pump is started when a run starts; the scan also finds active runs whose session nobody
pumps (their process died, its lease ran out) and starts a pump for them here. A pump that
fails is started again after a pause that doubles with each failure in a row; past
`max_failures` in a row, its session's active runs end with an `Error` that says why.

A pump that failed because the database could not be reached is started again the same way,
without counting the failure: its runs resume once the database is back (the pump reads the
log to know where goose's events stopped), rather than end for an outage of the database. What
runs after a failure, and needs the database itself, is tried again with backoff until it gets
through: a run is never left active because its pump's restart failed.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable

from ...coordination.leases import Lease
from ...coordination.periodic import Periodic
from ...coordination.tasks import TaskSet
from ...exceptions import DatabaseUnavailable
from ...log import EventLog
from ...log.reconnect import Backoff
from ...runs.lifecycle import RunLifecycle
from ...runs.store import RunStore
from ..pump_settings import PumpSettings
from ..watchers import PumpWatcher
from .client import GooseUpstream
from .pump import SessionPump

logger = logging.getLogger(__name__)

LEASE_PREFIX = "pump:"
PUMP_FAILED_ERROR = "the session pump failed {count} times in a row; the last failure: {error}"
PUMP_WAITS = "the pump of session %s cannot reach the database (%s); started again once it can"
RETRYING = "%s of session %s failed (%s); trying again in %.2g s"
RESTARTING = "restarting the pump"
GIVING_UP = "ending the runs of a failing pump"
RECHECKING = "looking for runs started meanwhile"


class PumpManager:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        upstream: GooseUpstream,
        settings: PumpSettings | None = None,
        lifecycle: RunLifecycle,
        watcher: PumpWatcher | None = None,
    ) -> None:
        self.log = log
        self.watcher = watcher  # told what every pump writes (the approvals)
        self.store = store
        self.upstream = upstream
        self.settings = settings or PumpSettings()
        self.scan_interval = self.settings.scan_interval
        # Shared with the run service: one lifecycle, so one set of per-run locks, per process.
        self.lifecycle = lifecycle
        self.lifecycle.pumps = self  # a recovery in a new session needs that session pumped
        self.holder = f"{uuid.uuid4().hex}"
        self._pumps: dict[str, asyncio.Task[bool]] = {}
        self._tasks = TaskSet()  # the pumps, and the rechecks and restarts they leave
        self._outages: dict[str, Backoff] = {}  # sessions whose pump found no database
        self._failures: dict[str, int] = {}  # failures in a row, per session
        self._scanner = Periodic(self.scan, self.scan_interval, "gateway-kit-pumps")
        # Set by `stop`: a run decision the lifecycle carries on past it starts no pump.
        self._stopped = False

    def running(self, session_id: str) -> bool:
        task = self._pumps.get(session_id)
        return task is not None and not task.done()

    def ensure(self, session_id: str) -> None:
        """Make sure this session is pumped (here, unless another process holds its lease)."""
        if self._stopped or self.running(session_id):
            return
        lease = Lease(self.log, LEASE_PREFIX + session_id, self.holder, self.settings.lease_ttl)
        pump = SessionPump(
            log=self.log,
            store=self.store,
            upstream=self.upstream,
            session_id=session_id,
            lease=lease,
            settings=self.settings,
            lifecycle=self.lifecycle,
            watcher=self.watcher,
        )
        task = self._tasks.start(pump.run(), name=f"gateway-kit-pump-{session_id}")
        task.add_done_callback(lambda done: self._pump_ended(session_id, done))
        self._pumps[session_id] = task

    def _pump_ended(self, session_id: str, task: asyncio.Task[bool]) -> None:
        if task.cancelled():
            return
        error = task.exception()
        settings = self.settings
        if isinstance(error, DatabaseUnavailable):
            # Not the session's fault: not counted, and its restart waits for the database.
            outage = self._outages.setdefault(
                session_id, Backoff(settings.reconnect_delay, settings.max_reconnect_delay)
            )
            if not outage.failures:
                logger.warning(PUMP_WAITS, session_id, error)
            pause = outage.next()
            self._later(session_id, lambda: self._restart(session_id, pause), RESTARTING)
            return
        self._outages.pop(session_id, None)
        if error is not None:
            count = self._failures[session_id] = self._failures.get(session_id, 0) + 1
            logger.error("the pump of session %s failed (%d in a row)", session_id, count,
                         exc_info=error)  # fmt: skip
            if count >= settings.max_failures:
                self._later(session_id, lambda: self._give_up(session_id, count, error), GIVING_UP)
            else:
                delay = settings.reconnect_delay * 2 ** (count - 1)
                pause = min(delay, settings.max_reconnect_delay)
                self._later(session_id, lambda: self._restart(session_id, pause), RESTARTING)
            return
        self._failures.pop(session_id, None)
        if task.result():
            # A run may have started while the pump was deciding to stop: look once more.
            self._later(session_id, lambda: self._recheck(session_id), RECHECKING)

    def _later(self, session_id: str, work: Callable[[], Awaitable[None]], what: str) -> None:
        """Run `work()` in a task of its own; made again, with backoff, while it fails (it
        needs the database, which may be away)."""

        async def until_done() -> None:
            backoff = Backoff(self.settings.reconnect_delay, self.settings.max_reconnect_delay)
            while True:
                try:
                    await work()
                    return
                except Exception as exc:
                    pause = backoff.next()
                    logger.warning(RETRYING, what, session_id, exc, pause)
                    await asyncio.sleep(pause)

        self._tasks.start(until_done())

    async def _recheck(self, session_id: str) -> None:
        if await asyncio.to_thread(self.store.active_runs, session_id):
            self.ensure(session_id)

    async def _restart(self, session_id: str, pause: float) -> None:
        await asyncio.sleep(pause)
        await self._recheck(session_id)

    async def _give_up(self, session_id: str, count: int, error: BaseException) -> None:
        reason = PUMP_FAILED_ERROR.format(count=count, error=error)
        for run in await asyncio.to_thread(self.store.active_runs, session_id):
            await self.lifecycle.upstream_failed(run, reason)
        self._failures.pop(session_id, None)

    async def scan(self) -> None:
        """Adopt every session that has an active run and no live pump here."""
        runs = await asyncio.to_thread(self.store.active_runs)
        for session_id in sorted({run.session_id for run in runs}):
            if session_id not in self._failures:  # else its restart waits out its pause
                self.ensure(session_id)

    async def start(self) -> None:
        self._stopped = False
        self._scanner.start()

    async def wait_idle(self) -> None:
        """Wait until every pump started so far has ended (tests, graceful shutdown)."""
        await self._tasks.wait_idle()

    async def stop(self) -> None:
        self._stopped = True
        await self._scanner.stop()
        await self._tasks.stop()
        self._pumps.clear()
