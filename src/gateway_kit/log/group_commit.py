"""Group commit: appends from many threads share one transaction.

The first thread to arrive commits everything queued so far (its own append included); appends
that arrive meanwhile wait and go together in the next transaction, led by the first of them.
Each waiter has its own wake-up, so a commit wakes exactly the threads it served and the one
that leads next, not every waiter.

Under steady load the threads would split into two cohorts taking turns: one commits while the
other queues. So a leader that has seen more appenders at once than it has queued waits for
them, up to `LINGER_SECONDS`; a lone append (one appender) never waits.

An append interrupted while it waits (KeyboardInterrupt, SystemExit) leaves the queue if no
transaction has taken it yet, and hands the lead on if it was to lead; one interrupted inside
a commit ends every append of that commit with the same interruption.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from ..exceptions import DatabaseUnavailable

LINGER_SECONDS = 0.001

In = TypeVar("In")
Out = TypeVar("Out")


class _Request(Generic[In, Out]):
    __slots__ = ("done", "error", "items", "leads", "result", "wake")

    def __init__(self, items: Sequence[In]) -> None:
        self.items = items
        self.done = False
        self.result: list[Out] = []
        self.error: BaseException | None = None
        self.leads = False  # this request leads (or is to lead) the next transaction
        # Released when done, or when this request is to lead; only a request that waits has
        # one. A bare lock, held from the start: acquiring it again waits for the release.
        self.wake: threading.Lock | None = None


class GroupCommit(Generic[In, Out]):
    def __init__(self, commit: Callable[[list[In]], list[Out]], lock: threading.Lock) -> None:
        self._commit = commit
        self._lock = lock  # held while committing; others (retention) may take it too
        self._mutex = threading.Lock()
        self._grown = threading.Condition(self._mutex)
        self._queue: list[_Request[In, Out]] = []
        self._leading = False
        self._lingering = False
        self._inflight = 0  # appends inside submit() now
        self._peak = 0  # how many were at once lately; decays by one a commit

    @property
    def waiting(self) -> int:
        """How many appends are queued for the next transaction (its leader's included)."""
        with self._mutex:
            return len(self._queue)

    @property
    def lingering(self) -> bool:
        """Whether a leader is waiting for the appenders it expects to queue up."""
        return self._lingering

    def submit(self, items: Sequence[In]) -> list[Out]:
        request: _Request[In, Out] = _Request(items)
        wake = threading.Lock()  # held before anyone can see it, in case this request waits
        wake.acquire()
        counted = False
        # An interruption may come at any call from here on; `_withdraw` undoes what was done.
        try:
            with self._mutex:
                self._inflight += 1
                counted = True
                # The next three assignments make no call, so no interruption falls between.
                request.leads = not self._leading
                self._leading = True
                if not request.leads:
                    request.wake = wake  # before a leader can see the request
                self._queue.append(request)
                self._peak = max(self._peak, self._inflight)
                if self._lingering and len(self._queue) >= self._peak:
                    self._grown.notify()
            if request.wake is not None:
                request.wake.acquire()
            if not request.done:  # this request leads the next transaction
                self._lead()
        except BaseException:  # interrupted: leave the queue, and the lead to another
            self._withdraw(request)
            raise
        finally:
            if counted:
                with self._mutex:
                    self._inflight -= 1
        if request.error is not None:
            raise request.error
        return request.result

    def _lead(self) -> None:
        batch: list[_Request[In, Out]] = []
        try:
            with self._mutex:
                self._linger()
                batch, self._queue = self._queue, []  # from here on the batch is ours
                self._peak = max(self._inflight, self._peak - 1)
            with self._lock:
                self._run(batch)
        except BaseException as exc:  # interrupted: what the batch has not learnt, it does now
            _fail([request for request in batch if not request.done], exc)
            raise
        finally:
            if batch:  # else interrupted while lingering: `_withdraw` passes the lead on
                with self._mutex:
                    successor = self._next_leader()
                for request in batch:
                    _wake(request)
                if successor is not None:
                    _wake(successor)  # not done: it leads

    def _next_leader(self) -> _Request[In, Out] | None:
        """With the mutex held: the first queued request is to lead next (the caller wakes
        it); None, and nobody leads, if the queue is empty."""
        successor = self._queue[0] if self._queue else None
        self._leading = successor is not None
        if successor is not None:
            successor.leads = True
        return successor

    def _withdraw(self, request: _Request[In, Out]) -> None:
        """An interrupted submit: take its request out of the queue, if no leader has taken
        it into a transaction, and if it was to lead, let the next request lead instead."""
        with self._mutex:
            if request.done:
                return  # a transaction settled it
            if request in self._queue:
                self._queue.remove(request)
            if not request.leads:
                return  # withdrawn, or in a transaction under way that its leader finishes
            # It led, or was to lead, and no transaction of its is under way: hand on.
            successor = self._next_leader()
        if successor is not None:
            _wake(successor)

    def _linger(self) -> None:
        """Wait (holding the mutex's condition) for the appenders seen lately to queue up."""
        if self._peak <= 1 or len(self._queue) >= self._peak:
            return
        deadline = time.monotonic() + LINGER_SECONDS
        self._lingering = True
        try:
            while len(self._queue) < self._peak:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self._grown.wait(remaining)
        finally:
            self._lingering = False

    def _run(self, batch: list[_Request[In, Out]]) -> None:
        """Commit the batch and settle each request. An interruption escapes; `_lead` then
        ends the requests not settled yet."""
        try:
            results = self._commit([item for r in batch for item in r.items])
        except DatabaseUnavailable as exc:
            # The transaction may have committed before its connection was lost: made again,
            # alone or together, its appends could be written twice. Each caller hears of it.
            _fail(batch, exc)
            return
        except Exception as exc:
            if len(batch) == 1:
                _fail(batch, exc)
                return
            # One transaction failed: commit each request alone, so an error reaches only
            # the append that caused it.
            for request in batch:
                self._run([request])
            return
        start = 0
        for request in batch:
            request.result = results[start : start + len(request.items)]
            start += len(request.items)
            request.done = True


def _fail(requests: list[_Request[In, Out]], error: BaseException) -> None:
    for request in requests:
        request.error = error
        request.done = True


def _wake(request: _Request[In, Out]) -> None:
    """Release the lock a waiting request holds from the start and takes again to wait.
    Waking a request twice does nothing, as setting an event twice would."""
    if request.wake is not None:
        with contextlib.suppress(RuntimeError):  # "release unlocked lock"
            request.wake.release()
