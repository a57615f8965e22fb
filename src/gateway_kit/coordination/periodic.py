"""`Periodic`: one piece of work, now and every `interval` seconds, until stopped.

The gateway's background scans (sessions nobody pumps, bills not yet delivered, owned runs whose
writer died) each run in one of these, in the event loop that started it. A failed round is
logged and the next one comes as usual; a closed log ends the loop. While the database cannot be
reached, rounds come at growing intervals, and the outage is logged once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from ..exceptions import DatabaseUnavailable, LogClosed
from ..log.reconnect import Backoff

logger = logging.getLogger(__name__)

UNAVAILABLE_MAX_PAUSE = 5.0  # seconds between rounds at most while the database is away
UNAVAILABLE = "%s: %s; trying again with growing pauses until the database is back"
BACK = "%s works again"


class Periodic:
    def __init__(self, work: Callable[[], Awaitable[object]], interval: float, name: str) -> None:
        self.work = work
        self.interval = interval
        self.name = name
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start in the running loop, unless already running there."""
        task = self._task
        if task is not None and not task.done() and task.get_loop() is asyncio.get_running_loop():
            return
        self._task = asyncio.create_task(self._forever(), name=self.name)

    async def _forever(self) -> None:
        # While the database cannot be reached, rounds come further apart (up to
        # `UNAVAILABLE_MAX_PAUSE`), and the outage is logged once, not every round.
        backoff = Backoff(self.interval, max(self.interval, UNAVAILABLE_MAX_PAUSE))
        while True:
            pause = self.interval
            try:
                await self.work()
            except LogClosed:
                return
            except DatabaseUnavailable as exc:
                pause = backoff.next()
                if backoff.failures == 1:
                    logger.warning(UNAVAILABLE, self.name, exc)
            except Exception:
                logger.exception("%s failed; trying again in %g s", self.name, self.interval)
            else:
                if backoff.failures:
                    logger.info(BACK, self.name)
                    backoff.reset()
            await asyncio.sleep(pause)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            return  # a loop that is gone took its task with it
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
