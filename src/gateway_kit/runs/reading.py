"""Reading a run's events to decide on them: every committed one, not only the settled ones a
reader by cursor is given."""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from typing import overload

from ..log import Event, EventLog

READ_BATCH = 1000


def read_all(log: EventLog, run_id: str, types: Collection[str] = ()) -> list[Event]:
    """Every committed event of the run (of `types`, if given), oldest first: its writers have
    committed what is decided on, which a reader by cursor may not be given yet."""
    events: list[Event] = []
    while True:
        after = events[-1].seq if events else 0
        batch = log.read(after, None, READ_BATCH, run_id=run_id, types=types, settled=False)
        events.extend(batch)
        if len(batch) < READ_BATCH:
            return events


class RunEvents(Sequence[Event]):
    """A run's events as the finish guards get them: read when a guard first looks, in the
    guard's thread, once for all of them; a guard that never looks costs no read."""

    def __init__(self, log: EventLog, run_id: str) -> None:
        self._log = log
        self._run_id = run_id
        self._events: list[Event] | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> list[Event]:
        with self._lock:
            if self._events is None:
                self._events = read_all(self._log, self._run_id)
            return self._events

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        return self._loaded()[index]

    def __len__(self) -> int:
        return len(self._loaded())

    def __iter__(self) -> Iterator[Event]:
        return iter(self._loaded())

    def __repr__(self) -> str:
        return f"RunEvents({self._run_id!r})"
