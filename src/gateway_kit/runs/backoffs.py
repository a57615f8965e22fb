"""`RetryBackoffs`: recoveries that wait before they are sent, without holding their run.

A recovery plan with a `delay` (a transient failure's backoff, a `Retry-After`) has its attempt
recorded at once, and its reply sent once the delay is over. Meanwhile the run's lock is free:
a cancel is recorded as usual and cuts the wait short, and the run then ends as cancelled; a run
ended or moved on meanwhile (its deadline, another process) is left as it is. A cancel asked in
another process is seen when the delay is over. goose does not know the waiting request yet: a
pump that reports it lost meanwhile is not heard (`RunLifecycle.upstream_failed`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ..coordination.tasks import TaskSet
from ..log.event import FINISH
from .model import Run, RunStatus

if TYPE_CHECKING:
    from .decisions import PendingRetry
    from .lifecycle import RunLifecycle


async def wait_or_woken(delay: float, woken: asyncio.Event) -> None:
    """Wait `delay` seconds, or less if `woken` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(woken.wait(), delay)


class RetryBackoffs:
    def __init__(self, lifecycle: RunLifecycle) -> None:
        self.lifecycle = lifecycle
        # How a delay is waited out; a test puts its own in its place to see the delays asked.
        self.wait: Callable[[float, asyncio.Event], Awaitable[None]] = wait_or_woken
        self._waiting: dict[str, asyncio.Event] = {}  # run id → set when it is cancelled
        self._tasks = TaskSet()

    def start(self, run: Run, delay: float, retry: PendingRetry) -> None:
        """Send `retry`, `run`'s current attempt, after `delay` seconds."""
        woken = self._waiting.setdefault(run.run_id, asyncio.Event())
        self._tasks.start(self._later(run, delay, retry, woken), name="gateway-kit-backoff")

    def pending(self, run_id: str) -> bool:
        """Whether the run's current attempt waits here, not yet sent to goose."""
        return run_id in self._waiting

    def cancel_noted(self, run_id: str) -> None:
        """A cancel of the run was recorded: its wait, if it has one here, ends now."""
        woken = self._waiting.get(run_id)
        if woken is not None:
            woken.set()

    async def _later(
        self, run: Run, delay: float, retry: PendingRetry, woken: asyncio.Event
    ) -> None:
        lifecycle = self.lifecycle
        try:
            await self.wait(delay, woken)
        finally:
            if self._waiting.get(run.run_id) is woken:
                del self._waiting[run.run_id]
        async with lifecycle.lock(run.run_id):
            current = await asyncio.to_thread(lifecycle.store.get, run.run_id)
            if current is None or not current.active:
                return
            if current.upstream_request_id != run.upstream_request_id:
                return  # another decision moved the run on meanwhile
            if current.cancel_requested:
                ending = {"reason": "cancelled"}
                await lifecycle.end_run(current, FINISH, ending, RunStatus.CANCELLED)
                return
            await lifecycle.decisions.send_retry(current, retry)

    async def stop(self) -> None:
        await self._tasks.stop()
