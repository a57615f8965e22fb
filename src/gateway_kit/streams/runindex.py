"""What this process knows about each run: the seq of every event in order, and how it ended.

Runs only ever grow at the end (seqs are strictly increasing), so an entry is refreshed by
reading after its last known seq; a poll of an idle run costs one small indexed query. The
legacy poll needs it to turn a per-task index into a seq, the run stream to know that a run
already ended before the client's cursor.
"""

from __future__ import annotations

import asyncio
from array import array
from collections import OrderedDict

from ..log import EventLog
from ..log.event import TERMINAL_TYPES
from ..log.pages import may_continue

READ_BATCH = 1000
DEFAULT_CAPACITY = 256  # runs kept; the least recently used one is forgotten first


class RunEntry:
    __slots__ = ("lock", "seqs", "stream", "terminal_seq", "terminal_type")

    def __init__(self) -> None:
        self.stream = ""  # the stream of the run's first event: whom reading it is asked of
        self.seqs = array("q")
        self.terminal_seq: int | None = None
        self.terminal_type: str | None = None
        self.lock = asyncio.Lock()

    @property
    def last_seq(self) -> int:
        return self.seqs[-1] if self.seqs else 0

    def ended_by(self, cursor: int) -> bool:
        """True when the run's terminal event is at or before `cursor`."""
        return self.terminal_seq is not None and self.terminal_seq <= cursor


class RunIndex:
    def __init__(
        self, log: EventLog, *, capacity: int = DEFAULT_CAPACITY, max_bytes: int | None = None
    ) -> None:
        self.log = log
        self.capacity = capacity
        self.max_bytes = max_bytes  # of events' data in one read: the index keeps none of it
        self._entries: OrderedDict[str, RunEntry] = OrderedDict()

    async def refresh(self, run_id: str) -> RunEntry | None:
        """The run's entry, up to date with the settled log; None when the log holds no
        committed event of it."""
        entry = self._entries.get(run_id)
        if entry is None:
            entry = RunEntry()
        async with entry.lock:
            while True:
                events = await self.log.aread(
                    entry.last_seq, None, READ_BATCH, run_id=run_id, max_bytes=self.max_bytes
                )
                for event in events:
                    if not entry.seqs:
                        entry.stream = event.stream
                    entry.seqs.append(event.seq)
                    if entry.terminal_seq is None and event.type in TERMINAL_TYPES:
                        entry.terminal_seq = event.seq
                        entry.terminal_type = event.type
                if not events or not may_continue(events, READ_BATCH, self.max_bytes):
                    break
        if not entry.seqs:
            return await self._committed(run_id, entry)
        self._entries[run_id] = entry
        self._entries.move_to_end(run_id)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return entry

    async def _committed(self, run_id: str, entry: RunEntry) -> RunEntry | None:
        """The run's entry, still empty, when its first events are committed but not settled
        yet (on PostgreSQL, while an older transaction anywhere on the server runs): the run
        exists, and whoever polls or follows it waits for its events. None: no such run."""
        first = await self.log.aread(0, None, 1, run_id=run_id, settled=False)
        if not first:
            return None
        entry.stream = first[0].stream
        return entry
