"""`RoomFeeds` at the moments that matter, driven by hand: a fake Socket.IO server whose sends
wait where the test says, over a log in memory."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from gateway_kit.sockets.feeds import Joining, RoomFeed, RoomFeeds, room_of

STREAM = "conv"
LIMIT = 3


@dataclass(frozen=True)
class FakeEvent:
    seq: int

    def envelope(self) -> dict[str, Any]:
        return {"seq": self.seq, "stream": STREAM}


class FakeLog:
    def __init__(self, last: int) -> None:
        self.events = [FakeEvent(seq) for seq in range(1, last + 1)]

    async def aread(
        self,
        after: int,
        stream: str | None,
        limit: int,
        *,
        run_id: str | None = None,
        max_bytes: int | None = None,
    ) -> list[FakeEvent]:
        assert run_id is None and max_bytes is None  # a stream's events, read without a cap
        return [e for e in self.events if e.seq > after][:limit]


class FakeOutboxes:
    limit = LIMIT

    async def drained(self, sid: str, gone: asyncio.Event) -> bool:
        return not gone.is_set()

    def over(self, sid: str) -> bool:
        return False


class Hold:
    def __init__(self) -> None:
        self.reached = asyncio.Event()
        self.released = asyncio.Event()


class FakeSio:
    """Records what reaches whom; a send to one connection of a seq in `holds` waits there
    until the test releases it."""

    def __init__(self, *holds: int) -> None:
        self.holds = {seq: Hold() for seq in holds}
        self.received: dict[str, list[int]] = {}
        self.rooms: dict[str, set[str]] = {}

    async def emit(
        self, name: str, message: dict[str, Any], *, to: str | None = None, **options: Any
    ) -> None:
        room = options.get("room")
        for sid in [to] if to is not None else sorted(self.rooms.get(room, ())):
            self.received.setdefault(sid, []).append(message["seq"])
        hold = self.holds.get(message["seq"])
        if hold is not None and to is not None:
            hold.reached.set()
            await hold.released.wait()

    async def enter_room(self, sid: str, room: str) -> None:
        self.rooms.setdefault(room, set()).add(sid)

    async def leave_room(self, sid: str, room: str) -> None:
        self.rooms.get(room, set()).discard(sid)


def test_a_burst_that_overflows_the_buffer_while_it_is_sent_is_read_from_the_log() -> None:
    async def main() -> None:
        log, sio = FakeLog(last=20), FakeSio(10, 11)
        feeds = RoomFeeds(log, hub=lambda: None, sio=sio, outboxes=FakeOutboxes())  # type: ignore[arg-type]
        feed = RoomFeed(STREAM, sub=None, last=10)  # type: ignore[arg-type]
        joining = feed.joining["a"] = Joining(LIMIT)
        room = room_of(STREAM)

        # The feed's own steps, driven by hand: a burst landing exactly while a join's replay is
        # being sent can be timed no other way.
        async def emit(seqs: range) -> None:
            for seq in seqs:
                await feeds._emit(feed, room, log.events[seq - 1])  # type: ignore[arg-type]

        entering = asyncio.create_task(feeds._enter("a", feed, joining, after=5))
        await sio.holds[10].reached.wait()  # "a" is sent 10, the last of its replay
        await emit(range(11, 12))  # the room emits 11 meanwhile: buffered for "a"
        sio.holds[10].released.set()
        await sio.holds[11].reached.wait()  # "a" is sent 11, from its buffer
        await emit(range(12, 17))  # more than its buffer holds
        sio.holds[11].released.set()
        await entering
        assert "a" in feed.members
        await emit(range(17, 18))
        assert sio.received["a"] == list(range(6, 18))  # once each, in order, 12..16 included

    asyncio.run(main())
