"""`PerLog`: one object per `EventLog` in this process, made on first use and gone with the
log (a weak mapping: the object must hold the log weakly, or the log would never go)."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

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
