"""`TaskSet`: the background tasks one owner started, kept until each ends, ended on stop.

The event loop holds only a weak reference to a task: one nobody keeps may be collected
mid-way. A task started here is kept until it ends, and `stop` cancels what is left and waits
for it, so nothing started by a part outlives the part.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")


class TaskSet:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self, work: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run `work` in a task of the running loop, kept here until it ends."""
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(list(self._tasks))

    def __len__(self) -> int:
        return len(self._tasks)

    async def wait_idle(self) -> None:
        """Wait until every task started so far, and any they started meanwhile, has ended."""
        while pending := [task for task in self._tasks if not task.done()]:
            await asyncio.wait(pending)

    def cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()

    async def stop(self) -> None:
        """Cancel every task left and wait for each to end; what they raised is theirs to log."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
