"""Fan-out: one live reader of the log per event loop, feeding a bounded queue per subscriber.

However many clients watch, the process tails the log once: the reader reads every new event,
builds its SSE frame once, and offers it to the subscribers of its stream (or of its run). It
never waits for a subscriber: a full queue ends that subscription (the client reconnects with
its cursor), and the others carry on.

Events this process commits are handed to the reader straight from the commit, without a
read, when they directly follow what it has handed out; anything else (other processes'
commits, a hand-off that arrives out of turn) the reader reads from the log as before.

A subscriber registers *before* it replays: `Subscription.high_water` is the last seq the reader
had handed out at that moment, so everything up to it is in the log for the replay and
everything after it arrives in the queue. The subscriber drops queued seqs it already sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Iterator

from ..exceptions import DatabaseUnavailable, LogClosed
from ..log import Event, EventLog
from .sse import frame

logger = logging.getLogger(__name__)

READ_BATCH = 1000
RETRY_DELAYS = (0.5, 1.0, 2.0, 5.0)
STOP_OVERFLOW = "overflow"
STOP_SHUTDOWN = "shutdown"
STOP_LOG_CLOSED = "log_closed"

# (seq, SSE frame, is terminal, the event): one tuple per event, shared by every subscriber.
Item = tuple[int, bytes, bool, Event]


class Subscription:
    """One client's live feed: a bounded queue, a wake-up, and a reason once it must stop."""

    __slots__ = ("high_water", "key", "max_items", "queue", "stop_reason", "stopped", "wake")

    def __init__(self, key: tuple[str, str], high_water: int, max_items: int) -> None:
        self.key = key
        self.high_water = high_water
        self.max_items = max_items
        self.queue: deque[Item] = deque()
        self.wake = asyncio.Event()
        self.stopped = asyncio.Event()
        self.stop_reason: str | None = None

    def offer(self, item: Item) -> bool:
        """Queue an item; False when the queue is full (the subscriber cannot keep up)."""
        if len(self.queue) >= self.max_items:
            return False
        self.queue.append(item)
        self.wake.set()
        return True

    def take(self) -> list[Item]:
        items = list(self.queue)
        self.queue.clear()
        self.wake.clear()
        return items

    def stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
            self.stopped.set()


class Hub:
    """The live reader of one log in one event loop, and the subscriptions it feeds."""

    def __init__(self, log: EventLog, *, queue_size: int, max_bytes: int | None = None) -> None:
        self.log = log
        self.queue_size = queue_size
        self.max_bytes = max_bytes  # of events' data in one read (a burst of large events)
        self.cursor = 0  # the last seq handed to subscribers
        self.reads = 0  # how many reads the live reader made (one tail, however many clients)
        self._subs: dict[tuple[str, str], set[Subscription]] = {}
        self._count = 0
        self._task: asyncio.Task[None] | None = None
        self._starting: asyncio.Future[int] | None = None  # the log's head, being fetched
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handed_token = -1  # the change token of the last commit handed off

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Subscription]:
        for subs in list(self._subs.values()):
            yield from list(subs)

    async def subscribe(
        self, *, stream: str | None = None, run_id: str | None = None
    ) -> Subscription:
        key = ("run", run_id) if run_id is not None else ("stream", stream or "")
        if self._task is None:
            # Every subscriber arriving while the log's head is fetched waits for the same
            # fetch; the first to resume starts the reader from it. A second fetch would move
            # the cursor past events owed to subscribers registered at the first one.
            if self._starting is None or self._starting.done():
                self._starting = asyncio.ensure_future(self.log.alast_seq())
            starting = self._starting
            try:
                head = await asyncio.shield(starting)
            except Exception:
                if self._starting is starting:
                    self._starting = None
                raise
            if self._task is None:
                self.cursor = head
                self._loop = asyncio.get_running_loop()
                self._task = asyncio.create_task(self._run(), name="gateway-kit-fanout")
                self._starting = None
        # No await from here on: the reader cannot hand out an event between reading the
        # cursor and registering, and it sees this subscriber before it can decide to stop.
        sub = Subscription(key, self.cursor, self.queue_size)
        self._subs.setdefault(key, set()).add(sub)
        self._count += 1
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        subs = self._subs.get(sub.key)
        if subs is None or sub not in subs:
            return
        subs.discard(sub)
        if not subs:
            del self._subs[sub.key]
        self._count -= 1

    def stop_all(self, reason: str) -> None:
        for sub in self:
            sub.stop(reason)
            self.unsubscribe(sub)

    async def _run(self) -> None:
        failures = 0
        stop_listening = self.log.add_commit_listener(self._committed)
        try:
            while self._count:
                seen = self.log.change_token  # before reading, so no commit slips between
                try:
                    events = await self.log.aread(
                        self.cursor, None, READ_BATCH, max_bytes=self.max_bytes
                    )
                except LogClosed:
                    self.stop_all(STOP_LOG_CLOSED)
                    return
                except Exception as exc:
                    delay = RETRY_DELAYS[min(failures, len(RETRY_DELAYS) - 1)]
                    failures += 1
                    if isinstance(exc, DatabaseUnavailable):  # no traceback: nothing to debug
                        logger.warning("reading the log failed (%s); retrying in %ss", exc, delay)
                    else:
                        logger.exception("reading the log failed; retrying in %ss", delay)
                    await asyncio.sleep(delay)
                    continue
                failures = 0
                self.reads += 1
                if events:
                    if events[-1].seq > self.cursor:  # else all handed off meanwhile
                        await self._dispatch(events)
                    continue  # a full page may have more behind it
                await self._wait_for_news(seen)
        finally:
            stop_listening()
            self._task = None

    async def _wait_for_news(self, seen: int) -> None:
        """Wait for a change the log must be read for: not one already handed off."""
        while True:
            await self.log.wait_for_change(seen, self.log.idle_recheck)
            token = self.log.change_token
            # Exactly one change since `seen`, and it was a commit handed off: nothing to read.
            if token != seen + 1 or token != self._handed_token:
                return
            seen = token

    def _committed(self, token: int, events: list[Event]) -> None:
        """In the committing thread: pass this process's new events to the loop."""
        loop = self._loop
        if loop is not None and len(events) <= self.queue_size // 2:
            with contextlib.suppress(RuntimeError):  # the loop is closed
                loop.call_soon_threadsafe(self._hand_off, token, events)

    def _hand_off(self, token: int, events: list[Event]) -> None:
        # Only the very next events: handing out anything after a gap would skip the gap.
        if self._task is not None and events[0].seq == self.cursor + 1:
            self._dispatch_slice(events)
            self._handed_token = token

    async def _dispatch(self, events: list[Event]) -> None:
        """Hand events out in slices smaller than a queue, letting subscribers write between.

        A burst (one read holds up to `READ_BATCH` events) then fills no healthy client's
        queue: only a subscriber that cannot write what it was given falls behind.
        """
        step = max(1, self.queue_size // 2)
        for start in range(0, len(events), step):
            if start:
                await asyncio.sleep(0)
            self._dispatch_slice(events[start : start + step])

    def _dispatch_slice(self, events: list[Event]) -> None:
        if events[0].seq <= self.cursor:  # a hand-off came between a read and its dispatch
            events = [e for e in events if e.seq > self.cursor]
            if not events:
                return
        overflowed: list[Subscription] = []
        for event in events:
            by_stream = self._subs.get(("stream", event.stream))
            by_run = self._subs.get(("run", event.run_id)) if event.run_id is not None else None
            if not by_stream and not by_run:
                continue
            item = (event.seq, frame(event), event.is_terminal, event)
            for subs in (by_stream, by_run):
                for sub in subs or ():
                    if not sub.offer(item):
                        overflowed.append(sub)
        # Before any await: a subscriber registering next replays up to here from the log.
        self.cursor = events[-1].seq
        for sub in overflowed:
            sub.stop(STOP_OVERFLOW)
            self.unsubscribe(sub)

    async def aclose(self) -> None:
        self.stop_all(STOP_SHUTDOWN)
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
