"""Wake-ups for tails: a version counter that any thread bumps and any loop or thread awaits.

Bumped by this process's commits and by the backend's watcher (another process committed).
A notification is only a hint to read again; tails also re-read on an idle timeout, so a lost
notification delays an event but never loses it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable


class Notifier:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._version = 0
        self._waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = set()

    @property
    def version(self) -> int:
        return self._version

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    def notify(self, before_waking: Callable[[int], None] | None = None) -> None:
        """Move the version on and wake every waiter; `before_waking(version)` runs first."""
        with self._cond:
            self._version += 1
            version = self._version
            self._cond.notify_all()
            waiters, self._waiters = self._waiters, set()
        if before_waking is not None:
            before_waking(version)
        for loop, future in waiters:
            with contextlib.suppress(RuntimeError):  # that loop is already closed
                loop.call_soon_threadsafe(_wake, future)

    async def wait(self, seen: int, timeout: float) -> bool:
        """Wait until the version moves past `seen`; False when `timeout` passed first."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._version != seen:
                return True
            future: asyncio.Future[None] = loop.create_future()
            entry = (loop, future)
            self._waiters.add(entry)
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return False
        finally:
            with self._cond:
                self._waiters.discard(entry)
        return True

    def wait_sync(self, seen: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: self._version != seen, timeout)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
