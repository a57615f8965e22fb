"""`RunLifecycle`: the one owner of a run's end.

The pump reports what goose said about the run's current attempt; the lifecycle has it decided
(`decide`, `ending.py`) and carried out (`decisions.py`: finish guards and follow-ups, error
classes and recoveries), one decision at a time per run, under the run's lock. A decision, once
reported, is carried to its end in a task of the lifecycle's own: the reporter may be cancelled
meanwhile (a connection to goose torn down while it reads, its pump stopping), and a decision
cut off half-way (a recovery's attempt recorded, its retry never sent) would leave the run
stranded. The lifecycle also ends the runs goose leaves hanging (`deadlines.py`) and sends the
retries whose backoff is over (`backoffs.py`): those parts answer, the lifecycle acts.

The run's `Finish` or `Error` is written once, with its status and bill (`end_writer.py`).
Hooks run in worker threads, each call within `hook_timeout`: a slow or raising plugin holds up
only its own run, and counts as having passed (a guard) or answered nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..coordination.periodic import Periodic
from ..coordination.tasks import TaskSet
from ..hooks import Plugins
from ..log import Event, EventLog
from ..settings import DEFAULT_WORKING_DIR
from .async_store import AsyncRunStore, run_events
from .backoffs import PendingRetry, RetryBackoffs
from .billing import BillingOutbox
from .deadlines import RunDeadlines, said_ended
from .decisions import RunDecisions
from .end_writer import EndWriter
from .ending import CANCELLED, End, failed
from .events import UPSTREAM_ERROR, UPSTREAM_FINISH
from .lifecycle_settings import LifecycleSettings
from .model import Run
from .ports import Pumps, Upstream
from .store import RunStore
from .upstream_calls import UpstreamCalls

logger = logging.getLogger(__name__)

STALE_FAILURE = "run %s: request %s was already replaced when it failed upstream: %s"
NOT_SENT_YET = "run %s: request %s waits out its backoff, goose has not got it yet: %s"

T = TypeVar("T")


class RunLifecycle:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        upstream: Upstream,
        plugins: Plugins,
        settings: LifecycleSettings | None = None,
        working_dir: str = DEFAULT_WORKING_DIR,
    ) -> None:
        self.log = log
        self.store = store
        self.runs = AsyncRunStore(store)
        self.upstream = upstream
        self.plugins = plugins  # the gateway's own: its hooks, thread pools and hung-call limits
        self.settings = settings or LifecycleSettings()
        self.billing = BillingOutbox(store, self.plugins, self.settings.billing)
        self.calls = UpstreamCalls(upstream, self.runs, self.settings)
        self.ends = EndWriter(log, self.billing)
        self.backoffs = RetryBackoffs(self._retry_due)
        self.deadlines = RunDeadlines(self.settings, log)
        self.decisions = RunDecisions(
            log=log,
            runs=self.runs,
            upstream=upstream,
            plugins=plugins,
            settings=self.settings,
            working_dir=working_dir,
            calls=self.calls,
            ends=self.ends,
            backoffs=self.backoffs,
        )
        self._overdue = Periodic(
            self.end_overdue_runs, self.deadlines.interval, "gateway-kit-deadlines"
        )
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks = TaskSet()

    @property
    def pumps(self) -> Pumps | None:
        """The pumps that report to this lifecycle (they set themselves here)."""
        return self.decisions.pumps

    @pumps.setter
    def pumps(self, pumps: Pumps | None) -> None:
        self.decisions.pumps = pumps

    # --- what the pump reports ---------------------------------------------------------------

    async def upstream_finished(self, run: Run, event: Event) -> None:
        """goose's `Finish` for one of the run's requests was appended as `event`."""
        await self._carried(self._finished(run, event))

    async def _finished(self, run: Run, event: Event) -> None:
        async with self.lock(run.run_id):
            current = await self._current(run, event)
            if current is not None:
                await self.decisions.finished(current)

    async def upstream_errored(self, run: Run, event: Event) -> None:
        """goose's `Error` for one of the run's requests was appended as `event`."""
        await self._carried(self._errored(run, event))

    async def _errored(self, run: Run, event: Event) -> None:
        async with self.lock(run.run_id):
            current = await self._current(run, event)
            if current is not None:
                await self.decisions.errored(current, str(event.data.get("error", "")))

    async def upstream_failed(self, run: Run, error: str) -> None:
        """`run`'s request failed upstream without an `Error` event of goose's. `run` is as the
        reporter last read it: a failure of an attempt that a newer one has replaced since (a
        follow-up or a recovery decided meanwhile) is about a request nobody waits for."""
        await self._carried(self._failed(run, error))

    async def _failed(self, run: Run, error: str) -> None:
        async with self.lock(run.run_id):
            current = await self.runs.get(run.run_id)
            if current is None or not current.active:
                return
            if current.upstream_request_id != run.upstream_request_id:
                logger.info(STALE_FAILURE, run.run_id, run.upstream_request_id, error)
                return
            if self.backoffs.pending(run.run_id):
                logger.info(NOT_SENT_YET, run.run_id, run.upstream_request_id, error)
                return
            await self.decisions.errored(current, error)

    async def resume(self, run: Run) -> bool:
        """A pump starts on the run's session: finish a decision a stopped process left; True
        when the run was ended or moved on here.

        The current attempt's `Finish` or `Error` may be in the log without the run's end (the
        process that appended it died before deciding): decide now. A run whose end is in the
        log but not in its row (a process died between the two, before they were written
        together) gets its row brought in line, and goose is asked to drop its request: nobody
        reads what it does any more.
        """
        return await self._carried(self._resume(run))

    async def _resume(self, run: Run) -> bool:
        async with self.lock(run.run_id):
            current = await self.runs.get(run.run_id)
            if current is None or not current.active:
                return False
            terminal = await self.log.arun_end(run.run_id)
            if terminal is not None:
                await self.runs.settle(current, terminal)
                self.calls.cancel_soon(current)
                return True
            ends = await run_events(self.log, run.run_id, (UPSTREAM_ERROR, UPSTREAM_FINISH))
            for event in ends:
                if event.data.get("chat_request_id") != current.upstream_request_id:
                    continue
                # The first of them decides, as it did live: goose's Finish follows its Error.
                if event.type == UPSTREAM_ERROR:
                    await self.decisions.errored(current, str(event.data.get("error", "")))
                    return True
                if event.type == UPSTREAM_FINISH:
                    await self.decisions.finished(current)
                    return True
            return False

    # --- ends decided here -------------------------------------------------------------------

    async def end_overdue_runs(self) -> list[Event]:
        """End every active run past one of its limits (`RunDeadlines`), and ask goose to drop
        its request (goose may still be working on it); the terminal events written here."""
        runs = await self.runs.active_runs()
        ended: list[Event] = []
        for run, end in await self.deadlines.overdue(runs, time.time()):
            event = await self.end_overdue(run, end)
            if event is not None:
                said_ended(run, event)
                self.calls.cancel_soon(run)
                ended.append(event)
        return ended

    async def end_overdue(self, run: Run, end: End) -> Event | None:
        """End a run the gateway stopped waiting for, unless it has ended."""
        lock = self.lock(run.run_id)
        if lock.locked():
            return None  # being decided here (its guards, say): not hanging on goose
        async with lock:
            current = await self.runs.get(run.run_id)
            if current is None or not current.active:
                return None
            return await self.ends.write(current, end)

    async def end_unstarted(self, run: Run, error: str) -> Event | None:
        """End a run goose never took (its `reply` was refused) with an `Error`."""
        async with self.lock(run.run_id):
            return await self.ends.write(run, failed(error))

    async def settle_ended(self, run: Run) -> bool:
        """True when the log already ends the run; its row, if still active, is brought in line
        and goose asked to drop its request (which would keep the session busy for the next).

        Rows written before a run's end was written with its terminal event (or by a process
        that died between the two) can say active for a run the log has ended.
        """
        terminal = await self.log.arun_end(run.run_id)
        if terminal is None:
            return False
        if await self.runs.settle(run, terminal):
            await self.calls.cancel(run)
        return True

    async def _retry_due(self, run: Run, retry: PendingRetry) -> None:
        """A retry's backoff is over: send it, unless the run ended or moved on meanwhile; a
        run cancelled meanwhile ends as cancelled."""
        async with self.lock(run.run_id):
            current = await self.runs.get(run.run_id)
            if current is None or not current.active:
                return
            if current.upstream_request_id != run.upstream_request_id:
                return  # another decision moved the run on meanwhile
            if current.cancel_requested:
                await self.ends.write(current, CANCELLED)
                return
            await self.decisions.send_retry(current, retry)

    # --- helpers -----------------------------------------------------------------------------

    async def _carried(self, decision: Coroutine[Any, Any, T]) -> T:
        """Run `decision` to its end whatever happens to the caller: a cancelled caller stops
        waiting, the decision goes on holding the run's lock (only `stop` cancels it)."""
        task = self._tasks.start(decision, name="gateway-kit-decision")
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_log_failure)  # nobody waits for it any more to hear it
            raise

    def lock(self, run_id: str) -> asyncio.Lock:
        lock = self._locks.get(run_id)
        if lock is None:
            lock = self._locks[run_id] = asyncio.Lock()
        if len(self._locks) > 10_000:  # forget the locks of runs nobody is deciding about
            for key in [k for k, v in self._locks.items() if not v.locked() and k != run_id]:
                del self._locks[key]
        return lock

    async def _current(self, run: Run, event: Event) -> Run | None:
        """The run as it is now, if `event` is about its current attempt and it is active."""
        current = await self.runs.get(run.run_id)
        if current is None or not current.active:
            return None
        if event.data.get("chat_request_id", current.upstream_request_id) != (
            current.upstream_request_id
        ):
            return None  # a late event of an attempt that was cancelled or superseded
        return current

    # --- life of the process -----------------------------------------------------------------

    async def start(self) -> None:
        await self.billing.start()
        self._overdue.start()

    async def stop(self) -> None:
        await self.backoffs.stop()
        await self.billing.stop()
        await self._overdue.stop()
        await self._tasks.stop()
        await self.calls.stop()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a run decision failed after its reporter stopped", exc_info=task.exception())
