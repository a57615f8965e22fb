"""`ExecutionRecorder`: one process's observed requests, written to the database behind them.

The observer notes each change of a request here (started, stream opened, ended) without
waiting; one writer task writes what changed since its last write in one transaction, in a
worker thread, and starts again at once if more changed meanwhile. So a request never waits
for the database, and under load many changes share one commit. What is pending is one row per
request (a newer change replaces an older one of the same request), so it is bounded by the
requests open at once, plus those that ended since the last write: while the database is away
those are kept up to `max_pending`, the oldest ended ones dropped first (logged once). The
writer retries with growing pauses and renews this process's row at least every third of
the process TTL, so other processes know its open requests are still open.

`flush` waits until every change noted before it is written: a decision in this process never
misses what this process saw.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable

from ..log.reconnect import Backoff
from .request_rows import RequestRows
from .state import Outcome, RequestRecord

logger = logging.getLogger("gateway_kit.heartbeat")

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
    :param max_pending: ended requests kept unwritten while the database is away, at most.
    """

    def __init__(
        self,
        rows: RequestRows,
        *,
        clock: Callable[[], float] = time.time,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.rows = rows
        self.clock = clock
        self.max_pending = max_pending
        self.process = process_name()
        self._open: dict[str, RequestRecord] = {}
        self._pending: dict[str, RequestRecord] = {}
        self._noted = 0  # changes noted so far
        self._written = 0  # changes noted before the last successful write began
        self._changed = asyncio.Event()
        self._progress = asyncio.Condition()
        self._writer: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._dropped = 0

    @property
    def open_requests(self) -> int:
        return len(self._open)

    # --- what the observer notes ----------------------------------------------------------

    def started(self, request_id: str, tmux_session: str, method: str, path: str) -> None:
        record = RequestRecord(
            request_id=request_id,
            tmux_session=tmux_session,
            process=self.process,
            method=method,
            path=path[:MAX_PATH_CHARS],
            started_at=self.clock(),
        )
        self._open[request_id] = record
        self._note(record)

    def sse_opened(self, request_id: str) -> None:
        record = self._open.get(request_id)
        if record is not None and record.sse_opened_at is None:
            self._change(dataclasses.replace(record, sse_opened_at=self.clock()))

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
        self._note(
            dataclasses.replace(
                record,
                ended_at=now,
                outcome=outcome.value,
                finish_reason=finish_reason,
                terminal_at=now if terminal else None,
            )
        )

    def _change(self, record: RequestRecord) -> None:
        self._open[record.request_id] = record
        self._note(record)

    def _note(self, record: RequestRecord) -> None:
        self._pending[record.request_id] = record
        self._noted += 1
        self._changed.set()
        self._start_writer()

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
            self._progress = asyncio.Condition()
        self._changed.set()
        self._writer = asyncio.create_task(self._write_forever(), name="execution-recorder")

    async def start(self) -> None:
        """Start writing (and renewing this process's row) in the running loop."""
        self._start_writer()

    async def _write_forever(self) -> None:
        renew_every = self.rows.process_ttl / 3
        backoff = Backoff(0.1, 5.0)
        while True:
            # Not wait_for: in Python 3.11 it may swallow a cancel that comes as the wait ends,
            # and a writer that outlives its loop's shutdown holds that shutdown up.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(renew_every):
                    await self._changed.wait()
            self._changed.clear()
            batch, self._pending = self._pending, {}
            noted = self._noted
            try:
                await asyncio.to_thread(
                    self.rows.write, list(batch.values()), process=self.process, now=self.clock()
                )
            except Exception as exc:  # the database away, or a bug: retry, never give up
                self._restore(batch)
                if not backoff.failures:
                    logger.warning(WRITE_FAILED, exc, len(self._pending))
                await asyncio.sleep(backoff.next())
                self._changed.set()
                continue
            if backoff.failures:
                logger.info(WRITING_AGAIN)
                backoff.reset()
            async with self._progress:
                self._written = noted
                self._progress.notify_all()

    def _restore(self, batch: dict[str, RequestRecord]) -> None:
        """Put a failed batch back under what changed since (newer rows win), within bounds."""
        batch.update(self._pending)
        self._pending = batch
        excess = len(batch) - self.max_pending
        if excess <= 0:
            return
        ended = sorted(
            (record for record in batch.values() if not record.open),
            key=lambda record: record.ended_at or 0.0,
        )
        for record in ended[:excess]:
            del batch[record.request_id]
        if not self._dropped:
            logger.warning(DROPPED, min(excess, len(ended)))
        self._dropped += min(excess, len(ended))

    async def flush(self, timeout: float = 5.0) -> bool:
        """Wait until every change noted so far is written; False if that took over `timeout`
        seconds (the database is away)."""
        target = self._noted
        if self._written >= target:
            return True
        self._start_writer()
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
