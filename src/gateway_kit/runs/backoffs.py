"""`RetryBackoffs`: recoveries that wait before they are sent, without holding their run.

A recovery plan with a `delay` (a transient failure's backoff, a `Retry-After`) has its attempt
recorded at once, and its reply sent once the delay is over: then `due(run, retry)` is called,
which looks at the run again (the lifecycle's: a run cancelled meanwhile ends as cancelled, one
ended or moved on meanwhile is left as it is). Meanwhile the run's lock is free: a cancel is
recorded as usual and cuts the wait short. A cancel asked in another process is seen when the
delay is over. goose does not know the waiting request yet: a pump that reports it lost
meanwhile is not heard (`RunLifecycle.upstream_failed`, through `pending`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..coordination.tasks import TaskSet
from ..hooks.results import RecoveryPlan
from .model import Run


@dataclass(frozen=True, slots=True)
class PendingRetry:
    """What a recovery attempt sends goose, once its backoff (if any) is over."""

    session_id: str
    prompt: str
    plan: RecoveryPlan
    error_class: str


async def wait_or_woken(delay: float, woken: asyncio.Event) -> None:
    """Wait `delay` seconds, or less if `woken` is set meanwhile."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(woken.wait(), delay)


class RetryBackoffs:
    """:param due: called with a waiting retry's run (as it was when the wait began) and the
    retry, once its delay is over or a cancel of the run cut it short."""

    def __init__(self, due: Callable[[Run, PendingRetry], Awaitable[None]]) -> None:
        self.due = due
        # How a delay is waited out; a test puts its own in its place to see the delays asked.
        self.wait: Callable[[float, asyncio.Event], Awaitable[None]] = wait_or_woken
        self._waiting: dict[str, asyncio.Event] = {}  # run id → set when it is cancelled
        self._tasks = TaskSet()

    def start(self, run: Run, delay: float, retry: PendingRetry) -> None:
        """Hand `retry`, `run`'s current attempt, to `due` after `delay` seconds."""
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
        try:
            await self.wait(delay, woken)
        finally:
            if self._waiting.get(run.run_id) is woken:
                del self._waiting[run.run_id]
        await self.due(run, retry)

    async def stop(self) -> None:
        await self._tasks.stop()
