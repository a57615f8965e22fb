"""`RoomFeeds`: one live feed per stream for this process's connections in the stream's room.

However many connections of a process watch a stream, the process reads the stream's new
events once (a subscription of the shared live reader) and emits each to the stream's room
once: python-socketio encodes the message once for every member. A connection that joins
replays from the log what it missed and then enters the room, without gap or duplicate:

- it registers a buffer with the feed *before* reading the log, and notes how far the feed
  has emitted (`last`): the replay reads up to there (`replay_pages`, as an SSE response's
  does), everything later lands in the buffer;
- once the replay is sent, it sends what the buffer gathered, and enters the room the moment
  the buffer is empty, with no await in between, so that the room's next emit includes it.

A connection is never sent more than its outbox holds (`Outboxes`): the replay reads a page
(capped by count and by the bytes of its events' data), sends it and waits for the connection's
writer to take it before reading the next; a buffer
that fills is dropped, and the replay reads on to where the room is instead. A member whose
outbox outgrows the limit leaves the room and joins again from the seq it was last sent, once
its writer has taken what it holds: a slow client costs a page of memory, not the log.

Room emits skip the message queue (python-socketio's Redis manager): each process delivers the
log to its own connections, and the log reaches every process by itself.

`extra_events` (given by whoever composes the server) names more messages an event makes, sent
right after its ``event`` message, to the room and in replays alike: the legacy clients' names
for approval events, say. A failure of it is logged and costs those messages only.

One module, though over 300 lines: the join (buffer, replay, enter) and the feed's emits are
one ordering argument, and it reads whole or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..coordination.tasks import TaskSet
from ..exceptions import LogClosed
from ..log import Event, EventLog
from ..streams.cursor import resume_point
from ..streams.fanout import STOP_OVERFLOW, Hub, Subscription
from ..streams.replay import replay_pages
from ..streams.request import Cursor
from .outbox import Outboxes

logger = logging.getLogger(__name__)

REPLAY_PAGE = 500

# extra_events(envelope): the (name, payload) messages an event's envelope also makes.
ExtraEvents = Callable[[Mapping[str, Any]], Sequence[tuple[str, Any]]]


def room_of(stream: str) -> str:
    return "stream:" + stream


class Joining:
    """A connection on its way into a room: what the room emitted meanwhile, up to a limit."""

    __slots__ = ("buffer", "gone", "limit", "overflowed")

    def __init__(self, limit: int) -> None:
        self.buffer: deque[Event] = deque()
        self.limit = limit
        self.overflowed = False  # the buffer was dropped: read on from the log instead
        self.gone = asyncio.Event()  # it left (unsubscribed, disconnected, joined anew)

    def offer(self, event: Event) -> None:
        if self.overflowed:
            return
        if len(self.buffer) >= self.limit:
            self.overflowed = True
            self.buffer.clear()
        else:
            self.buffer.append(event)


@dataclass
class RoomFeed:
    stream: str
    sub: Subscription
    last: int  # the last seq emitted to the room (or owed to it by the log, at the start)
    members: set[str] = field(default_factory=set)
    joining: dict[str, Joining] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class RoomFeeds:
    """:param log: the log the streams are read from.
    :param hub: the shared live reader of this event loop.
    :param sio: the Socket.IO server whose rooms are fed.
    :param outboxes: what each connection has waiting, and its limit.
    :param extra_events: the messages an event makes besides its ``event`` message.
    """

    def __init__(
        self,
        log: EventLog,
        hub: Callable[[], Hub],
        sio: Any,
        outboxes: Outboxes,
        *,
        max_page_bytes: int | None = None,
        extra_events: ExtraEvents | None = None,
    ) -> None:
        self.log = log
        self.extra_events = extra_events
        self.hub = hub
        self.sio = sio
        self.outboxes = outboxes
        self.page = max(1, min(REPLAY_PAGE, outboxes.limit))
        self.max_page_bytes = max_page_bytes  # of events' data in one replay page, besides one
        self.feeds: dict[str, RoomFeed] = {}
        self._starting: dict[str, asyncio.Future[RoomFeed]] = {}
        self._catching_up = TaskSet()

    async def join(
        self, sid: str, stream: str, cursor: Cursor, wanted: Callable[[], bool] = lambda: True
    ) -> None:
        """Send `sid` what `stream` holds after `cursor`, then make it a member of the room;
        unless `wanted()` says no once the stream's feed has started (the connection
        unsubscribed or left meanwhile)."""
        feed = await self._feed(stream)
        if not wanted():
            self._joined(feed, sid, None)
            return
        # What sid had of the stream ends here, with no await before the new registration:
        # of subscribes that overlap (a feed's start is awaited), the newest alone goes on.
        previous = feed.joining.pop(sid, None)
        if previous is not None:
            previous.gone.set()
        was_member = sid in feed.members
        feed.members.discard(sid)
        joining = feed.joining[sid] = Joining(self.outboxes.limit)
        if was_member:
            await self.sio.leave_room(sid, room_of(stream))
        try:
            resume = await resume_point(
                self.log, cursor, known_head=feed.last, stream=stream, unsettled=False
            )
            if resume.reset is not None:  # the same reset, and reasons, as over SSE
                await self._send(sid, json.loads(resume.reset))
            await self._enter(sid, feed, joining, resume.after)
        finally:
            self._joined(feed, sid, joining)

    async def _enter(self, sid: str, feed: RoomFeed, joining: Joining, after: int) -> None:
        """Send `sid` the stream after `after`, then what the room emitted meanwhile, then
        make it a member; unless it leaves or cannot be sent to first."""
        last = after
        while True:
            upto = feed.last  # the log has everything up to here; the buffer what follows
            last = await self._replay(sid, feed.stream, last, upto, joining.gone)
            while joining.buffer and not joining.gone.is_set():
                event = joining.buffer.popleft()
                if event.seq > last:
                    await self._send_event(sid, event)  # waits: the room emits meanwhile
                    last = event.seq
            if joining.gone.is_set():
                return
            if not joining.overflowed:
                break
            joining.overflowed = False  # what the buffer dropped is in the log by now
        # No await from the empty buffer to the room: the feed's next emit includes sid.
        feed.members.add(sid)
        try:
            await self.sio.enter_room(sid, room_of(feed.stream))
        except (KeyError, ValueError):  # it disconnected meanwhile: no room to enter
            feed.members.discard(sid)
            joining.gone.set()

    def _catch_up(self, feed: RoomFeed, sid: str) -> None:
        """`sid`, out of the room, joins again from the last seq it was sent once its writer
        has taken what waits for it."""
        joining = feed.joining[sid] = Joining(self.outboxes.limit)
        after = feed.last  # what it was sent last: the event whose emit put it over

        async def catch_up() -> None:
            try:
                if await self.outboxes.drained(sid, joining.gone):
                    await self._enter(sid, feed, joining, after)
            finally:
                self._joined(feed, sid, joining)

        self._catching_up.start(catch_up(), name=f"gateway-kit-catch-up-{sid}")

    def _joined(self, feed: RoomFeed, sid: str, joining: Joining | None) -> None:
        """`sid` is done joining: a member now, or gone; a feed nobody is left on stops."""
        if joining is not None and feed.joining.get(sid) is joining:
            del feed.joining[sid]
        if not feed.members and not feed.joining:
            self._stop(feed)

    async def leave(self, sid: str, stream: str) -> None:
        feed = self.feeds.get(stream)
        if feed is None or (sid not in feed.members and sid not in feed.joining):
            return
        joining = feed.joining.pop(sid, None)
        if joining is not None:
            joining.gone.set()
        if sid in feed.members:
            feed.members.discard(sid)
            await self.sio.leave_room(sid, room_of(stream))
        if not feed.members and not feed.joining:
            self._stop(feed)

    async def close(self) -> None:
        for feed in list(self.feeds.values()):
            self._stop(feed)
        self._catching_up.cancel()

    # --- the feed of one stream ------------------------------------------------------------

    async def _feed(self, stream: str) -> RoomFeed:
        feed = self.feeds.get(stream)
        if feed is not None:
            return feed
        starting = self._starting.get(stream)
        if starting is None:  # one start per stream, whoever else joins meanwhile waits for it
            starting = self._starting[stream] = asyncio.ensure_future(self._start(stream))
        try:
            return await asyncio.shield(starting)
        finally:
            if starting.done():
                self._starting.pop(stream, None)

    async def _start(self, stream: str) -> RoomFeed:
        sub = await self.hub().subscribe(stream=stream)
        feed = RoomFeed(stream, sub, sub.high_water)
        self.feeds[stream] = feed
        feed.task = asyncio.create_task(self._run(feed), name=f"gateway-kit-room-{stream}")
        return feed

    def _stop(self, feed: RoomFeed) -> None:
        if self.feeds.get(feed.stream) is feed:
            del self.feeds[feed.stream]
        if feed.task is not None:
            feed.task.cancel()
        self.hub().unsubscribe(feed.sub)

    async def _run(self, feed: RoomFeed) -> None:
        room = room_of(feed.stream)
        try:
            while True:
                await feed.sub.wake.wait()
                for seq, _, _, event in feed.sub.take():
                    if seq > feed.last:
                        await self._emit(feed, room, event)
                reason = feed.sub.stop_reason
                if reason is None:
                    continue
                if reason != STOP_OVERFLOW:
                    return  # the gateway stops: its connections are closed anyway
                # Fell behind the live reader: carry on from the log where the room is.
                self.hub().unsubscribe(feed.sub)
                feed.sub = await self.hub().subscribe(stream=feed.stream)
                await self._each(feed.stream, feed.last, feed.sub.high_water, feed, room)
                feed.last = max(feed.last, feed.sub.high_water)
        except (asyncio.CancelledError, LogClosed):
            pass
        except Exception:
            logger.exception(
                "the room feed of stream %r failed; its sockets reconnect", feed.stream
            )
            for sid in list(feed.members):
                with contextlib.suppress(Exception):
                    await self.sio.disconnect(sid, ignore_queue=True)
        finally:
            if self.feeds.get(feed.stream) is feed:  # a feed that ended is never joined again
                del self.feeds[feed.stream]

    async def _emit(self, feed: RoomFeed, room: str, event: Event) -> None:
        feed.last = event.seq
        for joining in feed.joining.values():
            joining.offer(event)
        if not feed.members:
            return
        envelope = event.envelope()
        await self.sio.emit("event", envelope, room=room, ignore_queue=True)
        for name, payload in self._extra(envelope):
            await self.sio.emit(name, payload, room=room, ignore_queue=True)
        behind = [sid for sid in feed.members if self.outboxes.over(sid)]
        for sid in behind:
            feed.members.discard(sid)
            self._catch_up(feed, sid)  # before any await: the next emit is buffered for it
        for sid in behind:
            await self.sio.leave_room(sid, room)

    async def _each(self, stream: str, after: int, upto: int, feed: RoomFeed, room: str) -> None:
        """Emit to the room each event of `stream` after `after` up to `upto`, from the log."""
        pages = replay_pages(
            self.log, after, upto, limit=REPLAY_PAGE, max_bytes=self.max_page_bytes, stream=stream
        )
        async with contextlib.aclosing(pages):
            async for page in pages:
                for event in page:
                    await self._emit(feed, room, event)

    # --- one connection's replay ---------------------------------------------------------

    async def _replay(
        self, sid: str, stream: str, after: int, upto: int, gone: asyncio.Event
    ) -> int:
        """Send `sid` the stream's events after `after` up to `upto`, a page at a time, each
        once its writer has taken what was queued for it; the last seq it has. `gone` is set
        when the connection left or could not be sent to."""

        # Before each page, not only between pages: a subscribe repeated while the client
        # reads nothing (each leaving the one before) must not queue a page apiece.
        async def writer_took_all() -> bool:
            if await self.outboxes.drained(sid, gone):
                return True
            gone.set()
            return False

        pages = replay_pages(
            self.log,
            after,
            upto,
            limit=self.page,
            max_bytes=self.max_page_bytes,
            stream=stream,
            before_read=writer_took_all,
        )
        async with contextlib.aclosing(pages):
            async for page in pages:
                for event in page:
                    if gone.is_set():  # it left meanwhile (a newer subscribe, say): sends wait
                        return after
                    await self._send_event(sid, event)
                    after = event.seq
        return after if gone.is_set() else max(after, upto)

    async def _send(self, sid: str, message: dict[str, Any]) -> None:
        # To a connection of this process: no need to go through the message queue.
        await self.sio.emit("event", message, to=sid, ignore_queue=True)

    async def _send_event(self, sid: str, event: Event) -> None:
        envelope = event.envelope()
        await self._send(sid, envelope)
        for name, payload in self._extra(envelope):
            await self.sio.emit(name, payload, to=sid, ignore_queue=True)

    def _extra(self, envelope: dict[str, Any]) -> Sequence[tuple[str, Any]]:
        if self.extra_events is None:
            return ()
        try:
            return self.extra_events(envelope)
        except Exception:
            # The event itself went out: a client misses these messages, not the stream.
            logger.exception("extra messages of event %s failed", envelope.get("seq"))
            return ()
