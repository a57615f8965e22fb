"""`RunKeeping`: which process runs an ACP run's turns, as a lease in the database, so that a
run whose gateway process died mid-turn is ended rather than left active.

An ACP turn lives in the process that prompted it (its agent is that process's child, or its
socket): nothing else can read it. So the process keeps a lease on each run it prompts for,
until the run ends, and every process looks, every `scan_interval`, for active ACP runs whose
lease nobody keeps: their process died (killed mid-turn, say), and the run ends with an `Error`
saying so. Its stream's next run continues the same ACP session (``session/load``).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable

from ...coordination.keepalive import LeaseKeeper
from ...coordination.leases import Lease
from ...coordination.periodic import Periodic
from ...coordination.tasks import TaskSet
from ...log import EventLog
from ...runs.lifecycle import RunLifecycle
from ...runs.model import Run
from ...runs.store import RunStore

logger = logging.getLogger(__name__)

LEASE_PREFIX = "acp-run:"
PROCESS_GONE = (
    "the gateway process that ran this turn of the ACP agent stopped (its lease on the run "
    "ran out); the turn is lost with it"
)


class RunKeeping:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        lifecycle: RunLifecycle,
        is_ours: Callable[[str], bool],
        ttl: float,
        scan_interval: float,
    ) -> None:
        self.log = log
        self.store = store
        self.lifecycle = lifecycle
        self.is_ours = is_ours  # whether a session id is one of this adapter's
        self.ttl = ttl
        self.holder = f"acp-{uuid.uuid4()}"
        self._kept: set[str] = set()
        self._tasks = TaskSet()
        self._scanner = Periodic(self.scan, scan_interval, "gateway-kit-acp-runs")

    def _lease(self, run_id: str) -> Lease:
        return Lease(self.log, LEASE_PREFIX + run_id, self.holder, self.ttl)

    async def keep(self, request_id: str) -> None:
        """Keep the run that made `request_id`, until it ends."""
        run = await asyncio.to_thread(self.store.by_upstream_request, request_id)
        if run is None or run.run_id in self._kept:
            return
        lease = self._lease(run.run_id)
        if not await asyncio.to_thread(lease.acquire):
            logger.warning("run %s is kept by another process", run.run_id)
            return
        self._kept.add(run.run_id)
        self._tasks.start(self._keep(run.run_id, lease), name="gateway-kit-acp-keep")

    async def _keep(self, run_id: str, lease: Lease) -> None:
        keeper = LeaseKeeper(lease, f"ACP run {run_id}", logger=logger, retake=True)
        try:
            async with keeper.kept():
                while True:
                    await asyncio.sleep(keeper.interval)
                    run = await asyncio.to_thread(self.store.get, run_id)
                    if run is None or not run.active:
                        return
        finally:
            self._kept.discard(run_id)
            try:
                await asyncio.to_thread(lease.release)
            except Exception:  # it runs out by itself
                logger.exception("releasing the lease of ACP run %s failed", run_id)

    async def scan(self) -> None:
        """End the active ACP runs nobody keeps: their process died."""
        now = time.time()
        for run in await asyncio.to_thread(self.store.active_runs):
            # A run just recorded is kept once its first prompt is sent, a moment later.
            if run.run_id in self._kept or not self.is_ours(run.session_id):
                continue
            if now - run.created_at < self.ttl:
                continue
            await self._end_orphan(run)

    async def _end_orphan(self, run: Run) -> None:
        lease = self._lease(run.run_id)
        if not await asyncio.to_thread(lease.acquire):
            return  # kept by its process
        try:
            logger.error("ACP run %s: %s", run.run_id, PROCESS_GONE)
            await self.lifecycle.upstream_failed(run, PROCESS_GONE)
        finally:
            await asyncio.to_thread(lease.release)

    async def start(self) -> None:
        self._scanner.start()

    async def stop(self) -> None:
        await self._scanner.stop()
        await self._tasks.stop()
