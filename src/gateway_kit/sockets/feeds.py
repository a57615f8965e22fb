"""`RoomFeeds`: one live feed per stream for this process's connections in the stream's room.

However many connections of a process watch a stream, the process reads the stream's new
events once (a subscription of the shared live reader) and emits each to the stream's room
once: python-socketio encodes the message once for every member. A connection that joins
replays from the log what it missed and then enters the room, without gap or duplicate:

- it registers a buffer with the feed *before* reading the log, and notes how far the feed
  has emitted (`last`): the replay reads up to there, everything later lands in the buffer;
- once the replay is sent, it sends what the buffer gathered, and enters the room the moment
  the buffer is empty, with no await in between, so that the room's next emit includes it.

Room emits skip the message queue (python-socketio's Redis manager): each process delivers the
log to its own connections, and the log reaches every process by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import LogClosed
from ..log import Event, EventLog
from ..streams.cursor import resume_point
from ..streams.fanout import STOP_OVERFLOW, Hub, Subscription
from ..streams.request import Cursor

logger = logging.getLogger("gateway_kit.sockets")

REPLAY_PAGE = 500


def room_of(stream: str) -> str:
    return "stream:" + stream


@dataclass
class RoomFeed:
    stream: str
    sub: Subscription
    last: int  # the last seq emitted to the room (or owed to it by the log, at the start)
    members: set[str] = field(default_factory=set)
    joining: dict[str, deque[Event]] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class RoomFeeds:
    """:param log: the log the streams are read from.
    :param hub: the shared live reader of this event loop.
    :param sio: the Socket.IO server whose rooms are fed.
    """

    def __init__(self, log: EventLog, hub: Callable[[], Hub], sio: Any) -> None:
        self.log = log
        self.hub = hub
        self.sio = sio
        self.feeds: dict[str, RoomFeed] = {}
        self._starting: dict[str, asyncio.Future[RoomFeed]] = {}

    async def join(self, sid: str, stream: str, cursor: Cursor) -> None:
        """Send `sid` what `stream` holds after `cursor`, then make it a member of the room."""
        await self.leave(sid, stream)
        feed = await self._feed(stream)
        buffer: deque[Event] = deque()
        feed.joining[sid] = buffer
        try:
            last = await self._replay(sid, stream, cursor, feed.last)
            while buffer:
                event = buffer.popleft()
                if event.seq > last:
                    await self._send(sid, event)
                    last = event.seq
            # No await from the empty buffer to the room: the feed's next emit includes sid.
            feed.members.add(sid)
            await self.sio.enter_room(sid, room_of(stream))
        finally:
            feed.joining.pop(sid, None)

    async def leave(self, sid: str, stream: str) -> None:
        feed = self.feeds.get(stream)
        if feed is None or (sid not in feed.members and sid not in feed.joining):
            return
        feed.joining.pop(sid, None)
        if sid in feed.members:
            feed.members.discard(sid)
            await self.sio.leave_room(sid, room_of(stream))
        if not feed.members and not feed.joining:
            self._stop(feed)

    async def close(self) -> None:
        for feed in list(self.feeds.values()):
            self._stop(feed)

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
                await self._each(
                    feed.stream, feed.last, feed.sub.high_water, lambda e: self._emit(feed, room, e)
                )
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
        for buffer in feed.joining.values():
            buffer.append(event)
        if feed.members:
            await self.sio.emit("event", event.envelope(), room=room, ignore_queue=True)

    # --- one connection's replay ---------------------------------------------------------

    async def _replay(self, sid: str, stream: str, cursor: Cursor, upto: int) -> int:
        """Send `sid` the stream's events after `cursor` up to `upto`; the last seq it has."""
        resume = await resume_point(self.log, cursor, known_head=upto, stream=stream)
        if resume.reset is not None:  # the same reset, and reasons, as over SSE
            await self.sio.emit("event", json.loads(resume.reset), to=sid, ignore_queue=True)
        await self._each(stream, resume.after, upto, lambda e: self._send(sid, e))
        return max(upto, resume.after)

    async def _each(
        self, stream: str, after: int, upto: int, send: Callable[[Event], Awaitable[None]]
    ) -> None:
        """`send` each event of `stream` after `after` up to `upto`, read from the log in pages."""
        while after < upto:
            page = await self.log.aread(after=after, stream=stream, limit=REPLAY_PAGE)
            for event in page:
                if event.seq <= upto:
                    await send(event)
            if len(page) < REPLAY_PAGE:
                return
            after = page[-1].seq

    async def _send(self, sid: str, event: Event) -> None:
        # To a connection of this process: no need to go through the message queue.
        await self.sio.emit("event", event.envelope(), to=sid, ignore_queue=True)
