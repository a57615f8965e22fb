"""When a run has ended: the log decides, by the run's terminal event.

A run ends with its first `Finish` or `Error` (see `gateway_kit.runs.events`: goose's own are
kept under other types). The run's row is written in the same transaction when the lifecycle
ends it; a run written by the app itself has no row, only its events.
"""

from __future__ import annotations

import asyncio

from ..log import Event, EventLog
from ..log.event import ERROR
from .model import Run, RunStatus
from .store import RunStore


async def terminal_event(log: EventLog, run: Run) -> Event | None:
    """The run's terminal event, or None while it runs."""
    return await log.arun_end(run.run_id)


def ending_status(event_type: str, *, cancel_requested: bool) -> RunStatus:
    if event_type == ERROR:
        return RunStatus.FAILED
    return RunStatus.CANCELLED if cancel_requested else RunStatus.FINISHED


def settle(store: RunStore, run: Run, terminal: Event) -> None:
    """Bring the row of a run the log has ended (by `terminal`) in line with that end."""
    store.end(run.run_id, ending_status(terminal.type, cancel_requested=run.cancel_requested))


async def settle_ended(log: EventLog, store: RunStore, run: Run) -> bool:
    """True when the log already ends the run; its row, if still active, is brought in line.

    Rows written before a run's end was written with its terminal event (or by a process that
    died between the two) can say active for a run the log has ended.
    """
    terminal = await terminal_event(log, run)
    if terminal is None:
        return False
    await asyncio.to_thread(settle, store, run, terminal)
    return True
