"""When a run has ended: the log decides, by the run's terminal event.

The run table follows the log: a process may die between appending a run's `Finish` and
recording it, so whoever finds such a run records the ending the log already holds.
"""

from __future__ import annotations

from ..log import Event, EventLog
from .model import Run, RunStatus


async def terminal_event(log: EventLog, run: Run) -> Event | None:
    """The run's terminal event, if the log's last event of the run is one."""
    last = await log.alatest(run.stream, run_id=run.run_id)
    return last if last is not None and last.is_terminal else None


def ending_status(event_type: str, *, cancel_requested: bool) -> RunStatus:
    if event_type == "Error":
        return RunStatus.FAILED
    return RunStatus.CANCELLED if cancel_requested else RunStatus.FINISHED
