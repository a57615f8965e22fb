"""`PerLog`: one object per `EventLog` in this process, made on first use and gone with the
log (a weak mapping: the object must hold the log weakly, or the log would never go)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from ..exceptions import LogClosed
from .eventlog import EventLog

T = TypeVar("T")


class PerLog(Generic[T]):
    def __init__(self, make: Callable[[EventLog], T]) -> None:
        self._make = make
        self._made: weakref.WeakKeyDictionary[EventLog, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, log: EventLog) -> T:
        with self._lock:
            found = self._made.get(log)
            if found is None:
                found = self._made[log] = self._make(log)
            return found


class HoldsLogWeakly:
    """Base of an object kept per log: it holds its log weakly, since the weak mapping's value
    holding it strongly would keep the log for ever."""

    def __init__(self, log: EventLog) -> None:
        self._log = weakref.ref(log)

    @property
    def log(self) -> EventLog:
        log = self._log()
        if log is None:
            raise LogClosed(f"the event log of this {type(self).__name__} is gone")
        return log
