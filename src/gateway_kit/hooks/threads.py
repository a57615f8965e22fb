"""`HookThreads`: worker threads for hook calls, where a call that never returns holds up no other.

A call's timeout counts from when a thread starts it, never while it waits for one. A call past
its timeout is *hung*: its caller gets `TimeoutError`, and its thread no longer counts among the
pool's `size`, so the next call gets a fresh thread instead of waiting behind it (what bounds
the hung threads is the cap per plugin, `gateway_kit.hooks.hung`). A thread whose hung call
returns at last goes back to work when the pool has room, else it ends. Otherwise threads are
kept, so that what a plugin opened in one (a connection) stays open; they are daemon threads,
so that a plugin that never returns does not keep the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class _Call:
    __slots__ = ("done", "finished", "function", "hung", "loop", "on_hung", "timeout", "timer")

    def __init__(
        self,
        function: Callable[[], Any],
        timeout: float,
        on_hung: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.function = function
        self.timeout = timeout
        self.on_hung = on_hung
        self.loop = loop
        self.done: asyncio.Future[Any] = loop.create_future()
        self.timer: asyncio.TimerHandle | None = None
        self.hung = False
        self.finished = False


class _Workers:
    """What the threads share; apart from `HookThreads` so that they keep no pool alive."""

    def __init__(self, size: int, name: str) -> None:
        self.size = size
        self.name = name
        self.calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self.idle = threading.Semaphore(0)  # one count per thread waiting for a call
        self.lock = threading.Lock()
        self.counted = 0  # threads, not counting those running a hung call
        self.threads = 0
        self.numbers = itertools.count(1)

    def submit(self, call: _Call) -> None:
        self.calls.put(call)
        if self.idle.acquire(blocking=False):
            return
        with self.lock:
            if self.counted < self.size:
                self._start()

    def _start(self) -> None:
        """A new thread (the lock held)."""
        self.counted += 1
        self.threads += 1
        name = f"{self.name}-{next(self.numbers)}"
        threading.Thread(target=self.work, name=name, daemon=True).start()

    def work(self) -> None:
        while True:
            call = self.calls.get()
            if call is None:
                break
            self.run(call)
            with self.lock:
                call.finished = True
                if call.hung:
                    if self.counted >= self.size:
                        break  # a fresh thread took its place
                    self.counted += 1
            self.idle.release()
        with self.lock:
            self.threads -= 1

    def run(self, call: _Call) -> None:
        try:
            call.loop.call_soon_threadsafe(self.arm, call)
        except RuntimeError:
            return  # the caller's event loop is closed: nobody waits for the answer
        result: Any = None
        error: BaseException | None = None
        try:
            result = call.function()
        except BaseException as exc:
            error = exc
        with contextlib.suppress(RuntimeError):
            call.loop.call_soon_threadsafe(self.answer, call, result, error)

    def arm(self, call: _Call) -> None:
        """On the caller's loop, as the call starts: its clock starts now (also when its
        caller has left: a call that never returns is counted as hung all the same)."""
        call.timer = call.loop.call_later(call.timeout, self.hang, call)

    def answer(self, call: _Call, result: Any, error: BaseException | None) -> None:
        if call.timer is not None:
            call.timer.cancel()
        if call.done.done():
            return  # hung, or its caller left
        if error is not None:
            call.done.set_exception(error)
        else:
            call.done.set_result(result)

    def hang(self, call: _Call) -> None:
        with self.lock:
            if call.finished or call.hung:
                return
            call.hung = True
            self.counted -= 1
            if not self.calls.empty() and self.counted < self.size:
                self._start()  # for the calls that would wait behind it
        call.on_hung()
        if not call.done.done():
            call.done.set_exception(TimeoutError())

    def close(self) -> None:
        for _ in range(self.threads):
            self.calls.put(None)


def _nothing() -> None:
    pass


class HookThreads:
    """:param size: threads running calls that are within their time.
    :param name: the threads' name prefix.
    """

    def __init__(self, size: int, name: str) -> None:
        self._workers = _Workers(size, name)
        weakref.finalize(self, self._workers.close)

    @property
    def hung(self) -> int:
        """Threads running a call past its timeout."""
        workers = self._workers
        with workers.lock:
            return workers.threads - workers.counted

    async def run(
        self, function: Callable[[], T], timeout: float, on_hung: Callable[[], None] = _nothing
    ) -> T:
        """`function()` in a thread; `TimeoutError` once it has run `timeout` seconds (it goes
        on in its thread, and its answer is dropped), after `on_hung` was called."""
        call = _Call(function, timeout, on_hung, asyncio.get_running_loop())
        self._workers.submit(call)
        result: T = await call.done
        return result
