"""`RunDeadlines`: which runs goose leaves hanging, and how the gateway ends them.

Two limits of `LifecycleSettings`, checked by every gateway process over every active run:

- `cancel_deadline`: goose's `Finish` did not follow a cancel in time (goose ignored it, or
  never heard it). The run ends as cancelled, its `Finish` saying the gateway stopped waiting,
  and goose is asked once more to drop the request; the stream takes a new run.
- `max_run_duration`: the run has gone on too long. It ends with an `Error` saying so, then
  goose's request is cancelled.

Both are measured from times in the database (the run's `created_at`, its `CancelRequested`
event's), never from a timer of the process that saw the run start, so they hold across
restarts and in whichever process looks first. `overdue` answers which runs are past a limit,
each with its end; the lifecycle looks every `interval` seconds and writes those ends, once per
run with its status and bill, however many processes race for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..log import Event, EventLog
from ..log.event import FINISH
from .ending import End, failed
from .events import CANCEL_REQUESTED
from .lifecycle_settings import LifecycleSettings
from .model import Run, RunStatus

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


def said_ended(run: Run, event: Event) -> None:
    """Say in the log that the gateway ended an overdue run with `event`, and why."""
    why = event.data.get("message") or event.data.get("error")
    logger.warning("run %s of stream %s: %s", run.run_id, run.stream, why)


def scan_interval(settings: LifecycleSettings) -> float:
    shortest = min(settings.cancel_deadline, settings.max_run_duration)
    return max(MIN_INTERVAL, min(MAX_INTERVAL, shortest / 4))


class RunDeadlines:
    """:param settings: the limits.
    :param log: where the runs' `CancelRequested` events are read.
    """

    def __init__(self, settings: LifecycleSettings, log: EventLog) -> None:
        self.settings = settings
        self.log = log
        self.interval = scan_interval(settings)
        self._unrecorded: dict[str, float] = {}  # cancelled runs without the event: first seen

    async def overdue(self, runs: Sequence[Run], now: float) -> list[tuple[Run, End]]:
        """The runs of `runs` (the active ones) past one of their limits at `now`, each with
        the end it gets."""
        cancelled = {run.run_id for run in runs if run.cancel_requested}
        self._unrecorded = {k: v for k, v in self._unrecorded.items() if k in cancelled}
        ends = [(run, await self._end_if_overdue(run, now)) for run in runs]
        return [(run, end) for run, end in ends if end is not None]

    async def _end_if_overdue(self, run: Run, now: float) -> End | None:
        settings = self.settings
        if run.cancel_requested:
            if await self._cancelled_at(run, now) + settings.cancel_deadline > now:
                return None
            message = CANCEL_UNCONFIRMED.format(seconds=settings.cancel_deadline)
            return End(FINISH, {"reason": "cancelled", "message": message}, RunStatus.CANCELLED)
        if run.created_at + settings.max_run_duration > now:
            return None
        return failed(TOO_LONG_ERROR.format(seconds=settings.max_run_duration))

    async def _cancelled_at(self, run: Run, now: float) -> float:
        """When the run's cancel was asked for: its `CancelRequested` event's time. The flag
        is written just before the event: without it, the time this process first saw the
        flag (the event may be on its way, or its process died in between)."""
        asked = await self.log.aread(
            0, None, 1, run_id=run.run_id, types=(CANCEL_REQUESTED,), settled=False
        )
        if asked:
            return asked[0].created_at.timestamp()
        return self._unrecorded.setdefault(run.run_id, now)
