"""`RunDeadlines`: the gateway ends the runs goose leaves hanging.

Two limits of `LifecycleSettings`, checked by every gateway process over every active run:

- `cancel_deadline`: goose's `Finish` did not follow a cancel in time (goose ignored it, or
  never heard it). The run ends as cancelled, its `Finish` saying the gateway stopped waiting,
  and goose is asked once more to drop the request; the stream takes a new run.
- `max_run_duration`: the run has gone on too long. It ends with an `Error` saying so, then
  goose's request is cancelled.

Both are measured from times in the database (the run's `created_at`, its `CancelRequested`
event's), never from a timer of the process that saw the run start, so they hold across
restarts and in whichever process looks first. The run's end is written by the lifecycle, once
per run with its status and bill, however many processes race for it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from ..coordination.periodic import Periodic
from ..log import Event
from ..log.event import ERROR, FINISH
from .events import CANCEL_REQUESTED
from .model import Run, RunStatus

if TYPE_CHECKING:
    from .lifecycle import RunLifecycle
    from .lifecycle_settings import LifecycleSettings

logger = logging.getLogger(__name__)

CANCEL_UNCONFIRMED = (
    "goose did not finish the run within {seconds:g} s of its cancel; the gateway ended it"
)
TOO_LONG_ERROR = (
    "the run went on longer than max_run_duration ({seconds:g} s); the gateway cancelled it"
)
# A look every quarter of the shortest limit ends a run within 125 % of it; never more often
# than MIN_INTERVAL, never less often than MAX_INTERVAL.
MIN_INTERVAL = 0.05
MAX_INTERVAL = 2.0


def scan_interval(settings: LifecycleSettings) -> float:
    shortest = min(settings.cancel_deadline, settings.max_run_duration)
    return max(MIN_INTERVAL, min(MAX_INTERVAL, shortest / 4))


class RunDeadlines:
    def __init__(self, lifecycle: RunLifecycle) -> None:
        self.lifecycle = lifecycle
        self.settings = lifecycle.settings
        self._periodic = Periodic(self.scan, scan_interval(self.settings), "gateway-kit-deadlines")
        self._unrecorded: dict[str, float] = {}  # cancelled runs without the event: first seen

    async def scan(self) -> list[Event]:
        """End every active run past one of its limits; the terminal events written here."""
        lifecycle = self.lifecycle
        runs = await asyncio.to_thread(lifecycle.store.active_runs)
        ended: list[Event] = []
        now = time.time()
        cancelled = {run.run_id for run in runs if run.cancel_requested}
        self._unrecorded = {k: v for k, v in self._unrecorded.items() if k in cancelled}
        for run in runs:
            event = await self._end_if_overdue(run, now)
            if event is not None:
                logger.warning("run %s of stream %s: %s", run.run_id, run.stream,
                               event.data.get("message") or event.data.get("error"))  # fmt: skip
                lifecycle.cancel_soon(run)  # goose may still be working on it
                ended.append(event)
        return ended

    async def _end_if_overdue(self, run: Run, now: float) -> Event | None:
        settings, lifecycle = self.settings, self.lifecycle
        if run.cancel_requested:
            if await self._cancelled_at(run, now) + settings.cancel_deadline > now:
                return None
            message = CANCEL_UNCONFIRMED.format(seconds=settings.cancel_deadline)
            ending = {"reason": "cancelled", "message": message}
            return await lifecycle.end_overdue(run, FINISH, ending, RunStatus.CANCELLED)
        if run.created_at + settings.max_run_duration > now:
            return None
        error = TOO_LONG_ERROR.format(seconds=settings.max_run_duration)
        failure: dict[str, Any] = {"error": error, "error_class": None}
        return await lifecycle.end_overdue(run, ERROR, failure, RunStatus.FAILED)

    async def _cancelled_at(self, run: Run, now: float) -> float:
        """When the run's cancel was asked for: its `CancelRequested` event's time. The flag
        is written just before the event: without it, the time this process first saw the
        flag (the event may be on its way, or its process died in between)."""
        asked = await asyncio.to_thread(
            self.lifecycle.log.read, 0, None, 1, run_id=run.run_id, types=(CANCEL_REQUESTED,),
            settled=False,
        )  # fmt: skip
        if asked:
            return asked[0].created_at.timestamp()
        return self._unrecorded.setdefault(run.run_id, now)

    def start(self) -> None:
        self._periodic.start()

    async def stop(self) -> None:
        await self._periodic.stop()
