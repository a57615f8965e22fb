"""Keeps one connection to the agent up: started at first use, restarted with backoff.

The first `connection()` starts the loop. A connection that ends (the process died, the socket
closed, the agent broke the protocol) is closed, and after a pause a new one is opened: the
pauses double from `restart_delay` up to `max_restart_delay` with each failure in a row (half
of each at random, so that restarts are not in step), and a connection that stayed up
`stable_after` seconds ends the streak. A start that fails counts as a failure too.

`connection()` waits for the next live connection, or fails with the error of the next attempt
that failed, or after `timeout`; it never waits through a whole crash loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ...exceptions import UpstreamError
from ..backoff import Streak
from .connection import AgentConnection
from .errors import AcpConnectionLost

logger = logging.getLogger(__name__)

NOT_UP = "the agent is not up after {timeout:g} s{why}"
SHUT_DOWN = "the upstream is closed: the gateway is shutting down"


@dataclass(frozen=True, slots=True)
class Restart:
    """One failure of the agent's connection and the pause after it."""

    reason: str
    pause: float
    at: float  # time.monotonic() of the failure


class Supervisor:
    def __init__(
        self,
        launch: Callable[[], Awaitable[AgentConnection]],
        *,
        restart_delay: float,
        max_restart_delay: float,
        stable_after: float,
        stop_grace: float,
    ) -> None:
        self._launch = launch
        self._streak = Streak(restart_delay, max_restart_delay)
        self._stable_after = stable_after
        self._stop_grace = stop_grace
        self.current: AgentConnection | None = None
        self.history: list[Restart] = []
        self.started = 0  # connections opened
        self._attempts = 0  # starts that ended, opened or failed
        self._last_error: UpstreamError | None = None
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    async def connection(self, timeout: float) -> AgentConnection:
        if self._closed:
            raise AcpConnectionLost(SHUT_DOWN)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="acp-supervisor")
        deadline = time.monotonic() + timeout
        attempts = self._attempts
        while True:
            current = self.current
            if current is not None and current.alive:
                return current
            if self._closed:
                raise AcpConnectionLost(SHUT_DOWN)
            if self._attempts != attempts and self._last_error is not None:
                raise self._last_error  # a start that began after this call failed
            changed = self._changed
            remaining = deadline - time.monotonic()
            try:
                await asyncio.wait_for(changed.wait(), max(remaining, 0.0))
            except TimeoutError:
                why = f": {self._last_error}" if self._last_error else ""
                raise AcpConnectionLost(NOT_UP.format(timeout=timeout, why=why)) from None

    def _signal(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def _run(self) -> None:
        while not self._closed:
            try:
                connection = await self._launch()
            except UpstreamError as exc:
                self._attempts += 1
                self._failed(exc)
            else:
                self.started += 1
                self.current = connection
                self._attempts += 1
                self._last_error = None
                self._signal()
                await connection.ended.wait()
                loss = await connection.loss()
                if time.monotonic() - connection.opened_at >= self._stable_after:
                    self._streak.reset()
                await connection.aclose(str(loss), grace=self._stop_grace)
                self.current = None
                self._failed(loss)
            if self._closed:
                return
            await asyncio.sleep(self.history[-1].pause)

    def _failed(self, error: UpstreamError) -> None:
        self._streak.failed(str(error))
        pause = self._streak.pause()
        self.history.append(Restart(str(error), pause, time.monotonic()))
        self._last_error = error
        logger.warning("the agent's connection failed (%s); next try in %.2f s", error, pause)
        self._signal()

    async def aclose(self, reason: str = SHUT_DOWN) -> None:
        """Stop restarting and end the current connection (its waiting requests fail)."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        current, self.current = self.current, None
        if current is not None:
            await current.aclose(reason, grace=self._stop_grace)
        self._signal()
