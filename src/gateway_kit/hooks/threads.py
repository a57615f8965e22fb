"""`HookThreads`: worker threads for hook calls, where a call that never returns holds up no other.

A call's timeout counts, by default, from when it is queued: the time it waits for a thread
counts against it, so a caller that serves a request never waits much longer than the timeout,
however many calls are ahead of it. A call whose timeout ends before any thread started it is
not run at all: its caller gets `NotStarted` (no thread was free: no verdict of the plugin).
A pool made with ``count_queued=False`` times a call from when a thread starts it instead (for
work no client waits on, where a late answer is better than none: the hooks of a run's life).

A call past its timeout once started is *hung*: its caller gets `TimeoutError`, and its thread
no longer counts among the pool's `size`, so the next call gets a fresh thread instead of
waiting behind it (what bounds the hung threads is the cap per plugin,
`gateway_kit.hooks.hung`). A thread whose hung call returns at last goes back to work when the
pool has room, else it ends. Otherwise threads are kept, so that what a plugin opened in one (a
connection) stays open; they are daemon threads, so that a plugin that never returns does not
keep the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class NotStarted(TimeoutError):
    """No thread of the pool started the call within its timeout (the call was not run)."""


class _Call:
    __slots__ = (
        "done",
        "expired",
        "finished",
        "function",
        "hung",
        "loop",
        "on_hung",
        "started",
        "timeout",
        "timer",
    )

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
        self.started = False  # a thread took it (set under the pool's lock)
        self.expired = False  # its time ended before a thread took it: it is never run
        self.hung = False
        self.finished = False


class _Workers:
    """What the threads share; apart from `HookThreads` so that they keep no pool alive."""

    def __init__(self, size: int, name: str, count_queued: bool) -> None:
        self.size = size
        self.name = name
        self.count_queued = count_queued
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)  # a call was queued for a waiting thread
        self.calls: deque[_Call | None] = deque()
        # Threads waiting for a call that no queued call is meant for yet: counted exactly,
        # under the lock, so that a call never waits for a thread that is in fact busy.
        self.waiting = 0
        self.counted = 0  # threads, not counting those running a hung call
        self.threads = 0
        self.numbers = itertools.count(1)

    def submit(self, call: _Call) -> None:
        """Queue `call` (on the caller's loop)."""
        if self.count_queued:
            call.timer = call.loop.call_later(call.timeout, self.expire, call)
        with self.lock:
            self.calls.append(call)
            if self.waiting:
                self.waiting -= 1  # that thread is this call's
                self.ready.notify()
            elif self.counted < self.size:
                self._start()

    def _start(self) -> None:
        """A new thread (the lock held)."""
        self.counted += 1
        self.threads += 1
        name = f"{self.name}-{next(self.numbers)}"
        threading.Thread(target=self.work, name=name, daemon=True).start()

    def work(self) -> None:
        while True:
            call = self.next_call()
            if call is None:
                break
            self.run(call)
            with self.lock:
                call.finished = True
                if call.hung:
                    if self.counted >= self.size:
                        break  # a fresh thread took its place
                    self.counted += 1
        with self.lock:
            self.threads -= 1

    def next_call(self) -> _Call | None:
        with self.lock:
            while not self.calls:
                self.waiting += 1
                self.ready.wait()
            return self.calls.popleft()

    def run(self, call: _Call) -> None:
        with self.lock:
            if call.expired:
                return  # its caller was answered already: no thread was free in time
            call.started = True
        try:
            if not self.count_queued:
                call.loop.call_soon_threadsafe(self.arm, call)
            elif call.loop.is_closed():
                return
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
        """On the caller's loop, as a call of a pool that times from the start starts: its
        clock starts now (also when its caller has left: a call that never returns is counted
        as hung all the same)."""
        call.timer = call.loop.call_later(call.timeout, self.expire, call)

    def answer(self, call: _Call, result: Any, error: BaseException | None) -> None:
        if call.timer is not None:
            call.timer.cancel()
        if call.done.done():
            return  # hung, or its caller left
        if error is not None:
            call.done.set_exception(error)
        else:
            call.done.set_result(result)

    def expire(self, call: _Call) -> None:
        """On the caller's loop, once `call`'s time is up."""
        with self.lock:
            if call.finished or call.hung or call.expired:
                return
            if not call.started:
                call.expired = True  # the thread that takes it from the queue drops it
            else:
                call.hung = True
                self.counted -= 1
                if self.calls and self.counted < self.size:
                    self._start()  # for the calls that would wait behind it
        if call.expired:
            if not call.done.done():
                call.done.set_exception(NotStarted())
            return
        call.on_hung()
        if not call.done.done():
            call.done.set_exception(TimeoutError())

    def close(self) -> None:
        with self.lock:
            self.calls.extend([None] * self.threads)
            self.waiting = 0
            self.ready.notify_all()


def _nothing() -> None:
    pass


class HookThreads:
    """:param size: threads running calls that are within their time.
    :param name: the threads' name prefix.
    :param count_queued: a call's timeout counts from when it is queued (else from when a
        thread starts it).
    """

    def __init__(self, size: int, name: str, *, count_queued: bool = True) -> None:
        self._workers = _Workers(size, name, count_queued)
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
        """`function()` in a thread; `NotStarted` when no thread started it within `timeout`
        (it is then never run); `TimeoutError` once it has run past `timeout` (it goes on in
        its thread, and its answer is dropped), after `on_hung` was called."""
        call = _Call(function, timeout, on_hung, asyncio.get_running_loop())
        self._workers.submit(call)
        result: T = await call.done
        return result
