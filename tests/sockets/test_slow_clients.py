"""Socket.IO clients that read slowly or not at all: the gateway holds a page for each, not the
log, and each still gets every event once, in order, once it reads again."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from gateway_kit import EventLog, Gateway, GatewaySettings, HttpSettings, StreamSettings
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.sockets.server import SocketServer
from tests.support.flask_site import flask_app
from tests.support.serving import serve_in_thread
from tests.support.socket_clients import WAIT, Client, HandClient, with_token
from tests.support.waiting import settled, until

STREAM = "long-conversation"
LIMIT = 40  # messages one connection may have waiting
PAD = "x" * 16_000  # events big enough that a few fill the sockets' buffers
EVENTS = 600
SEND_BUFFER = 64 * 1024  # the server's per connection, whatever the machine's own settings


@pytest.fixture
def gateway(log_url: str) -> Iterator[tuple[str, Gateway, str]]:
    """A served gateway whose connections may have `LIMIT` messages waiting, alice's token."""
    log = EventLog(log_url)
    StreamOwners(log).declare(STREAM, "alice")
    _, token = ApiTokens(log).create("alice")
    gateway = Gateway(
        flask_app(log),
        log=log,
        settings=GatewaySettings(
            streams=StreamSettings(queue_size=LIMIT), http=HttpSettings(send_timeout=3.0)
        ),
    )
    try:
        with serve_in_thread(gateway, send_buffer=SEND_BUFFER) as base:
            yield base, gateway, token
    finally:
        log.close()


def sockets_of(gateway: Gateway) -> SocketServer:
    assert gateway.sockets is not None
    return gateway.sockets


def append(log: EventLog, first: int, count: int) -> list[int]:
    numbers = range(first, first + count)
    events = log.append_many(
        [{"stream": STREAM, "type": "Message", "data": {"n": n, "pad": PAD}} for n in numbers]
    )
    return [e.seq for e in events]


@asynccontextmanager
async def hand_client(base: str, token: str) -> AsyncIterator[HandClient]:
    """A connection of alice's that reads only when told, closed when the block ends."""
    client = await HandClient.connect(base, await with_token(base, token).ticket())
    try:
        yield client
    finally:
        await client.close()


@asynccontextmanager
async def slow_and_steady(base: str, token: str) -> AsyncIterator[tuple[HandClient, Client]]:
    """Two connections of one user: one that reads only when told, and a python-socketio
    client that reads all the time."""
    async with hand_client(base, token) as slow:
        steady = with_token(base, token)
        try:
            await steady.connect()
            yield slow, steady
        finally:
            await steady.sio.disconnect()


def parked_replays(server: SocketServer) -> list[tuple[str, int]]:
    """Record, for each time a connection's feed waits for its client to read, the
    connection and what waits for it."""
    parked: list[tuple[str, int]] = []
    drained = server.outboxes.drained

    async def recording(sid: str, gone: asyncio.Event) -> bool:
        parked.append((sid, server.outboxes.pending(sid)))
        return await drained(sid, gone)

    server.outboxes.drained = recording  # type: ignore[method-assign]
    return parked


async def replay_waits(server: SocketServer, parked: list[tuple[str, int]], sid: str) -> None:
    """Until a replay to `sid` waits for its client to read, with messages queued for it."""
    await until(
        lambda: any(p for s, p in parked if s == sid) and server.outboxes.pending(sid) > 0,
        failure=lambda: "no replay waited for the client that reads nothing",
    )


async def receives_live(client: HandClient, log: EventLog, before: list[int]) -> None:
    """`client` is in the stream's room: an event appended now reaches it, after exactly the
    seqs `before`."""
    later = log.append(STREAM, "Message", {"n": "live"})
    await client.read_until(lambda: client.seqs(STREAM)[-1:] == [later.seq], "a live event")
    assert client.seqs(STREAM) == [*before, later.seq]


def run(body: Any) -> Any:
    return asyncio.run(body)


def test_a_replay_to_a_client_that_stops_reading_holds_a_page_not_the_stream(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)
    seqs = append(gw.log, 0, EVENTS)
    settled(gw.log)  # the replay reads what a reader by cursor is given
    parked = parked_replays(server)

    async def main() -> None:
        async with hand_client(base, token) as client:
            ack = await client.subscribe(STREAM, after=0)
            # The client reads nothing: once the sockets' buffers are full, the replay waits.
            await replay_waits(server, parked, client.sid)
            assert server.outboxes.pending(client.sid) <= LIMIT
            assert all(pending <= LIMIT for _, pending in parked)
            # Once it reads, it gets the whole stream once, in order, then its answer.
            await client.read_until(lambda: ack in client.acks, "the subscription's answer")
            assert client.acks[ack] == {"ok": True}
            assert client.seqs(STREAM) == seqs
            # And it is a member of the room: what is appended now reaches it live.
            await receives_live(client, gw.log, seqs)

    run(main())


def test_a_flood_of_subscriptions_to_a_long_stream_holds_one_replay(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)
    seqs = append(gw.log, 0, EVENTS)
    settled(gw.log)
    parked = parked_replays(server)
    flood = 30

    async def main() -> None:
        async with hand_client(base, token) as client:
            # Each subscribe leaves the one before; only the newest replay goes on.
            acks = [await client.subscribe(STREAM, after=0) for _ in range(flood)]
            await replay_waits(server, parked, client.sid)
            # A page or two, and the answers: not a replay per subscribe.
            assert server.outboxes.pending(client.sid) <= 2 * LIMIT + flood
            await client.read_until(lambda: all(a in client.acks for a in acks), "every answer")
            assert [client.acks[a] for a in acks] == [{"ok": True}] * flood
            await client.read_until(lambda: client.seqs(STREAM)[-1:] == seqs[-1:], "the stream")
            assert client.seqs(STREAM)[-EVENTS:] == seqs
            assert len(client.seqs(STREAM)) <= EVENTS + 2 * LIMIT

    run(main())


def test_a_member_that_falls_behind_catches_up_from_the_log_without_gap_or_duplicate(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)

    async def main() -> None:
        async with slow_and_steady(base, token) as (slow, steady):
            ack = await slow.subscribe(STREAM)
            await slow.read_until(lambda: ack in slow.acks, "the subscription's answer")
            assert await steady.subscribe(STREAM) == {"ok": True}
            # Live events while `slow` reads nothing: it leaves the room, `steady` does not.
            seqs = await asyncio.to_thread(
                lambda: [seq for n in range(0, 400, 20) for seq in append(gw.log, n, 20)]
            )
            await steady.until(lambda: steady.seqs(STREAM) == seqs, "every event, live")
            feed = server.rooms.feeds[STREAM]
            await until(lambda: feed.last == seqs[-1], failure=lambda: "the room's feed lags")
            assert slow.sid not in feed.members
            assert slow.sid in feed.joining  # waiting for its client to read
            assert server.outboxes.pending(slow.sid) <= LIMIT + 1
            # It reads again: everything once, in order, and then it is back in the room.
            await slow.read_until(lambda: slow.seqs(STREAM)[-1:] == seqs[-1:], "caught up")
            assert slow.seqs(STREAM) == seqs
            await until(
                lambda: slow.sid in feed.members,
                failure=lambda: "the caught-up connection is not back in the room",
            )
            await receives_live(slow, gw.log, seqs)

    run(main())


def test_a_client_that_reads_nothing_for_the_send_timeout_is_closed(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)
    append(gw.log, 0, EVENTS)
    settled(gw.log)

    async def main() -> None:
        async with slow_and_steady(base, token) as (client, other):
            assert await other.subscribe(STREAM, after=0) == {"ok": True}
            eio_sid = server.sio.manager.eio_sid_from_sid(client.sid, "/")
            eio_socket = server.sio.eio.sockets[eio_sid]  # python-engineio's, with its queue
            await client.subscribe(STREAM, after=0)
            # It is closed, and what waited for it is let go: only the goodbye and the writer's
            # end mark are left.
            await until(
                lambda: client.sid not in server.connections and eio_socket.queue.qsize() <= 2,
                timeout=15.0,
                failure=lambda: "the client that reads nothing is still connected",
            )
            assert STREAM not in server.rooms.feeds or (
                client.sid not in server.rooms.feeds[STREAM].joining
            )
            # When it reads again it gets what was on its way, then the goodbye at once.
            await client.read_until_closed()
            # Its presence is gone with it.
            watching = await asyncio.to_thread(server.presence.watching, STREAM)
            assert len(watching["connections"]) == 1, watching
            # The other connection of the same user carries on.
            later = append(gw.log, EVENTS, 1)
            await other.until(lambda: other.seqs(STREAM)[-1:] == later, "the next event")

    run(main())


def test_subscribes_and_unsubscribes_sent_at_once_leave_presence_as_the_last_one_said(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)
    append(gw.log, 0, 50)
    settled(gw.log)

    async def main() -> None:
        async with hand_client(base, token) as client:
            asked = []
            for _ in range(20):  # switching conversations faster than the answers come
                asked.append(await client.subscribe(STREAM, after=0))
                asked.append(await client.unsubscribe(STREAM))
            await client.read_until(lambda: all(a in client.acks for a in asked), "every answer")
            watching = await asyncio.to_thread(server.presence.watching, STREAM)
            assert watching["connections"] == [], watching
            assert STREAM not in server.connections[client.sid].streams
            feed = server.rooms.feeds.get(STREAM)
            assert feed is None or (
                client.sid not in feed.members and client.sid not in feed.joining
            )

    run(main())


class Gate:
    """Holds up the first `authorize_subscription` of the served gateway until opened."""

    def __init__(self, server: SocketServer) -> None:
        self.entered = threading.Event()
        self.opened = threading.Event()
        self.left = threading.Event()
        authorize = server.plugins.authorize_subscription
        calls = 0

        async def held(principal: Any, stream: str) -> bool:
            nonlocal calls
            calls += 1
            if calls > 1:
                return await authorize(principal, stream)
            self.entered.set()
            await asyncio.to_thread(self.opened.wait, WAIT)
            try:
                return await authorize(principal, stream)
            finally:
                self.left.set()

        server.plugins.authorize_subscription = held  # type: ignore[method-assign]

    async def wait_entered(self) -> None:
        assert await asyncio.to_thread(self.entered.wait, WAIT), "nobody asked to subscribe"

    async def wait_left(self) -> None:
        assert await asyncio.to_thread(self.left.wait, WAIT), "the held one was not answered"


def test_a_subscribe_still_authorizing_does_not_undo_the_requests_sent_after_it(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)
    seqs = append(gw.log, 0, EVENTS)
    settled(gw.log)
    cursor = seqs[99]
    parked = parked_replays(server)
    gate = Gate(server)

    async def main() -> None:
        async with hand_client(base, token) as client:
            await client.subscribe(STREAM, after=0)  # held in its authorization
            await gate.wait_entered()
            leaving = await client.unsubscribe(STREAM)
            await client.read_until(lambda: leaving in client.acks, "the unsubscribe's answer")
            await client.subscribe(STREAM, after=cursor)  # the last word
            # Its replay waits for the client to read when the first one's authorization ends.
            await replay_waits(server, parked, client.sid)
            gate.opened.set()
            await gate.wait_left()
            await client.read_until(lambda: len(client.acks) == 3, "every answer")
            assert list(client.acks.values()) == [{"ok": True}] * 3
            await client.read_until(lambda: client.seqs(STREAM)[-1:] == seqs[-1:], "the stream")
            await receives_live(client, gw.log, seqs[100:])  # from the last cursor, once each

    run(main())


def test_a_connection_gone_while_its_subscribe_was_authorized_leaves_no_feed_behind(
    gateway: tuple[str, Gateway, str],
) -> None:
    base, gw, token = gateway
    server = sockets_of(gw)
    head = append(gw.log, 0, 3)[-1]
    settled(gw.log)
    gate = Gate(server)

    async def main() -> None:
        async with hand_client(base, token) as client:
            await client.subscribe(STREAM, after=head)  # nothing to replay: into the room
            await gate.wait_entered()
        await until(
            lambda: client.sid not in server.connections,
            failure=lambda: "the closed connection is still known",
        )
        gate.opened.set()  # the subscribe goes on for a connection that is gone
        await until(
            lambda: STREAM not in server.rooms.feeds,
            failure=lambda: "a feed still runs for a connection that is gone",
        )
        watching = await asyncio.to_thread(server.presence.watching, STREAM)
        assert watching["connections"] == []

    run(main())
