"""`ExecutionRecorder`: one process's observed requests, written to the database behind them.

The observer notes each change of a request here (started, stream opened, ended) without
waiting. One writer task writes, in a worker thread and one transaction, what a `window` of
changes left to write, and only that:

- a request that started and ended within the window is written once, ended; and of several
  such requests of one tmux session only the one that ended last, since the state of a session
  is folded from its newest request and its newest answer alone;
- a request still open is written (open) once it is older than the window, so that other
  processes see it waiting or streaming; its end is then written too;
- at least every third of the process TTL this process's row is renewed, so that other
  processes know its open requests are still open.

So a request never waits for the database, other processes see a change within about two
windows, and under load a handful of rows share each commit. `flush` writes everything at once
(open requests too) and waits for it: a decision in this process never misses what it saw.

Memory is bounded by the requests open at once, plus those that ended since the last write:
while the database is away those are kept up to `max_pending`, the oldest ended ones dropped
first (logged once), and the writer retries with growing pauses.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import replace

from ..log.reconnect import Backoff
from .request_rows import RequestRows
from .state import Outcome, RequestRecord

logger = logging.getLogger(__name__)

DEFAULT_WINDOW = 0.05
DEFAULT_MAX_PENDING = 10_000
MAX_PATH_CHARS = 200
WRITE_FAILED = "writing the execution state failed (%s); %d requests wait, trying again"
WRITING_AGAIN = "the execution state is written again"
DROPPED = (
    "%d ended requests were dropped while the database was away: their sessions' states may "
    "be older than they are"
)


def process_name() -> str:
    """This process, among every gateway process on every host."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class ExecutionRecorder:
    """:param rows: where the requests are written.
    :param clock: the time of each change (epoch seconds).
    :param window: seconds of changes one write gathers (and the age from which an open
        request is written).
    :param max_pending: ended requests kept unwritten while the database is away, at most.
    """

    def __init__(
        self,
        rows: RequestRows,
        *,
        clock: Callable[[], float] = time.time,
        window: float = DEFAULT_WINDOW,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.rows = rows
        self.clock = clock
        self.window = window
        self.max_pending = max_pending
        self.process = process_name()
        # Request ids: this process's random tag and a count, unique among every process's.
        self._tag = uuid.uuid4().hex[:12]
        self._ids = itertools.count(1)
        # Each request as last noted: a change replaces its record, which is never changed.
        self._open: dict[str, RequestRecord] = {}
        self._pending: dict[str, RequestRecord] = {}
        # Requests whose row may be in the database, open: their end must be written too.
        self._written_open: set[str] = set()
        self._noted = 0  # changes noted so far
        self._written = 0  # changes noted before the last write of everything began
        self._changed = asyncio.Event()
        self._urgent = asyncio.Event()
        self._progress = asyncio.Condition()
        self._writer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dropped = 0

    def next_request_id(self) -> str:
        return f"{self._tag}-{next(self._ids)}"

    @property
    def open_requests(self) -> int:
        return len(self._open)

    # --- what the observer notes ----------------------------------------------------------

    def started(self, request_id: str, tmux_session: str, method: str, path: str) -> None:
        record = RequestRecord(
            request_id, tmux_session, self.process, method, path[:MAX_PATH_CHARS], self.clock()
        )
        self._open[request_id] = record
        self._note(record)

    def sse_opened(self, request_id: str) -> None:
        record = self._open.get(request_id)
        if record is not None and record.sse_opened_at is None:
            record = self._open[request_id] = replace(record, sse_opened_at=self.clock())
            self._note(record)

    def ended(
        self,
        request_id: str,
        outcome: Outcome,
        *,
        finish_reason: str | None = None,
        terminal: bool = False,
    ) -> None:
        record = self._open.pop(request_id, None)
        if record is None:
            return
        now = self.clock()
        record = replace(
            record,
            ended_at=now,
            outcome=outcome.value,
            finish_reason=finish_reason,
            terminal_at=now if terminal else None,
        )
        self._note(record)

    def _note(self, record: RequestRecord) -> None:
        self._pending[record.request_id] = record
        self._noted += 1
        self._changed.set()
        self._start_writer()

    # --- what one write takes -------------------------------------------------------------

    def _take(self, now: float, everything: bool) -> list[RequestRecord]:
        """The requests to write now; what is left waits for the next write."""
        rows: list[RequestRecord] = []
        newest_end: dict[str, RequestRecord] = {}  # per session: its ended request never written
        left: dict[str, RequestRecord] = {}
        written_open = self._written_open
        for request_id, record in self._pending.items():
            if record.ended_at is None:
                if (
                    everything
                    or request_id in written_open
                    or now - record.started_at >= self.window
                ):
                    written_open.add(request_id)
                    rows.append(record)
                else:
                    left[request_id] = record  # may well end before the next write
            elif request_id in written_open:
                rows.append(record)
            else:
                known = newest_end.get(record.tmux_session)
                if known is None or (known.ended_at or 0.0) <= record.ended_at:
                    newest_end[record.tmux_session] = record
        rows += newest_end.values()
        self._pending = left
        return rows

    # --- the writer -----------------------------------------------------------------------

    def _start_writer(self) -> None:
        writer = self._writer
        if writer is not None and not writer.done():
            return
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # asyncio's primitives belong to one loop: a new loop (a new server) gets new ones.
            self._loop = loop
            self._changed = asyncio.Event()
            self._urgent = asyncio.Event()
            self._progress = asyncio.Condition()
        self._changed.set()
        self._writer = asyncio.create_task(self._write_forever(), name="execution-recorder")

    async def start(self) -> None:
        """Start writing (and renewing this process's row) in the running loop."""
        self._start_writer()

    async def _wait(self, event: asyncio.Event, seconds: float) -> None:
        # Not wait_for: in Python 3.11 it may swallow a cancel that comes as the wait ends,
        # and a writer that outlives its loop's shutdown holds that shutdown up.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await event.wait()

    async def _write_forever(self) -> None:
        renew_every = self.rows.process_ttl / 3
        backoff = Backoff(0.1, 5.0)
        while True:
            await self._wait(self._changed, renew_every)
            if not self._urgent.is_set():
                await self._wait(self._urgent, self.window)  # gather a window of changes
            everything = self._urgent.is_set()
            self._changed.clear()
            self._urgent.clear()
            noted = self._noted
            taken = self._take(self.clock(), everything)
            try:
                await asyncio.to_thread(
                    self.rows.write, taken, process=self.process, now=self.clock()
                )
            except Exception as exc:  # the database away, or a bug: retry, never give up
                self._restore(taken)
                if not backoff.failures:
                    logger.warning(WRITE_FAILED, exc, len(self._pending))
                await asyncio.sleep(backoff.next())
                self._changed.set()
                continue
            # An ended request written is done with: nothing of it is written again.
            self._written_open.difference_update(
                record.request_id for record in taken if record.ended_at is not None
            )
            if backoff.failures:
                logger.info(WRITING_AGAIN)
                backoff.reset()
            if self._pending:
                self._changed.set()  # open requests left for later
            if everything:
                async with self._progress:
                    self._written = noted
                    self._progress.notify_all()

    def _restore(self, taken: list[RequestRecord]) -> None:
        """Put a failed write back, within bounds; a request that changed meanwhile is
        pending already, as its newer record."""
        for record in taken:
            self._pending.setdefault(record.request_id, record)
        excess = len(self._pending) - self.max_pending
        if excess <= 0:
            return
        ended = sorted(
            (record for record in self._pending.values() if record.ended_at is not None),
            key=lambda record: record.ended_at or 0.0,
        )
        for record in ended[:excess]:
            del self._pending[record.request_id]
            self._written_open.discard(record.request_id)
        if not self._dropped:
            logger.warning(DROPPED, min(excess, len(ended)))
        self._dropped += min(excess, len(ended))

    async def flush(self, timeout: float = 5.0) -> bool:
        """Write every change noted so far, open requests too, and wait until it is written;
        False if that took over `timeout` seconds (the database is away)."""
        target = self._noted
        if self._written >= target:
            return True
        self._start_writer()
        self._urgent.set()
        self._changed.set()
        try:
            async with asyncio.timeout(timeout), self._progress:
                await self._progress.wait_for(lambda: self._written >= target)
        except TimeoutError:
            return False
        return True

    async def stop(self) -> None:
        """Write what is pending (within a few seconds), then stop writing."""
        await self.flush()
        writer, self._writer = self._writer, None
        if writer is None or writer.get_loop() is not asyncio.get_running_loop():
            return
        writer.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await writer
