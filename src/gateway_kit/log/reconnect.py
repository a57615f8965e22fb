"""Losing the database and finding it again: which errors mean the connection is gone, the
backoff between attempts to reconnect, and the gate that spaces those attempts out.

A connection that was lost is never used again: the next call opens a new one. While the
server cannot be reached, connecting is tried again only after a pause that doubles with each
failure in a row (bounded, jittered, so that processes and threads do not retry in step); a
call in between raises `DatabaseUnavailable` at once rather than wait for a connect that is
bound to fail. The loops that reconnect by themselves (listener, announcer, periodic work)
pause between their attempts in the same way, longer.
"""

from __future__ import annotations

import random
import select
import threading
import time
from typing import Any

from ..exceptions import DatabaseUnavailable

BACKOFF_FIRST = 0.05  # seconds before the second attempt
BACKOFF_MAX = 2.0  # seconds between a loop's attempts at most: bounds how late it heals
BACKOFF_JITTER = 0.25  # each pause is up to this fraction shorter, at random
# Seconds at most during which calls fail without trying, after a failed connect: short, since
# a call arriving just after the server came back fails for that long.
GATE_MAX = 0.5

UNREACHABLE = "the database cannot be reached: {error}"
WAITING = "the database cannot be reached (next attempt in {delay:.2g} s): {error}"
# A generator of its own: the jitter of background threads leaves the global one alone.
_JITTER = random.Random()

LOST = "the connection to the database was lost: {error}"
# An append or write whose connection died may have committed or not: the caller, not this
# layer, can tell (by reading), so it is never made again here.
LOST_WRITING = (
    "the connection to the database was lost during a write, which may or may not have been "
    "committed: {error}"
)


MAX_DOUBLINGS = 64  # past this a pause is at its cap anyway; keeps 2**n a small number


def pause_after(failures: int, first: float, maximum: float, jitter: float) -> float:
    """The pause after `failures` failures in a row (at least one): doubling from `first` up to
    `maximum`, shortened by up to `jitter` of it at random, so that retries are not in step."""
    doublings = min(max(failures - 1, 0), MAX_DOUBLINGS)
    return min(first * 2.0**doublings, maximum) * (1 - jitter * _JITTER.random())


class Backoff:
    """Pauses that double from `first` up to `maximum`, each shortened by up to `jitter`."""

    def __init__(
        self,
        first: float = BACKOFF_FIRST,
        maximum: float = BACKOFF_MAX,
        jitter: float = BACKOFF_JITTER,
    ) -> None:
        self.first = first
        self.maximum = maximum
        self.jitter = jitter
        self.failures = 0

    def next(self) -> float:
        """The pause after one more failure in a row."""
        self.failures = min(self.failures + 1, MAX_DOUBLINGS)
        return pause_after(self.failures, self.first, self.maximum, self.jitter)

    def reset(self) -> None:
        self.failures = 0


class Gate:
    """Spaces out the attempts of every thread to connect to one server."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._backoff = Backoff(maximum=GATE_MAX)
        self._not_before = 0.0
        self._error = ""

    def check(self) -> None:
        """`DatabaseUnavailable` while the pause after the last failed connect runs."""
        if self._not_before and (wait := self._not_before - time.monotonic()) > 0:
            raise DatabaseUnavailable(WAITING.format(delay=wait, error=self._error))

    def failed(self, error: BaseException) -> DatabaseUnavailable:
        with self._lock:
            self._error = describe(error)
            self._not_before = time.monotonic() + self._backoff.next()
        return DatabaseUnavailable(UNREACHABLE.format(error=self._error))

    def succeeded(self) -> None:
        if self._not_before:
            with self._lock:
                self._backoff.reset()
                self._not_before = 0.0

    @property
    def down(self) -> bool:
        """Whether the last attempt to connect failed."""
        return bool(self._not_before)


def describe(error: BaseException) -> str:
    """An error's text on one line (libpq's span several)."""
    return " ".join(str(error).split()) or type(error).__name__


def is_lost(conn: Any) -> bool:
    """Whether a psycopg connection can no longer be used (closed, or broken by an error)."""
    return bool(conn.closed or getattr(conn, "broken", False))


def hung_up(conn: Any) -> bool:
    """Whether the server has hung up on an idle connection, which it has not noticed yet.

    An idle connection that was asked nothing has nothing to read, unless the server closed
    it (or sent its last words, a FATAL message, before closing): then a statement sent on it
    would be lost, and it is better not sent. One poll, no wait.
    """
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except Exception:  # closed already
        return True
    return bool(readable)
