"""`GET /sessions/{id}/events`: framing, ids, replay by Last-Event-ID, ActiveRequests, pings."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit.testing import TOO_FAR_BEHIND_ERROR, FakeGoose, Turn

from .frames import FAST_PINGS, open_events, start_reply


def test_frames_have_an_id_and_one_data_line_and_no_event_line() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        async with fake.client() as client:
            await start_reply(client, session_id, "one two three")
            async with open_events(client, session_id) as events:
                frames = await events.events_until("Finish")
        for frame in frames:
            assert [line.split(":", 1)[0] for line in frame.lines] == ["id", "data"]
        assert [f.id for f in frames] == [str(n) for n in range(1, len(frames) + 1)]

    asyncio.run(main())


def test_ids_count_from_one_across_every_request_of_the_session() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id, other_session = fake.create_session(), fake.create_session()
        async with fake.client() as client:
            first = await start_reply(client, session_id, "a b c")
            await fake.wait_idle()
            second = await start_reply(client, session_id, "d e f")
            await start_reply(client, other_session, "x")
            async with open_events(client, session_id) as events:
                frames = await events.events_until("Finish")
                frames += await events.events_until("Finish")
            async with open_events(client, other_session) as events:
                other = await events.events_until("Finish")
        assert [int(f.id or 0) for f in frames] == list(range(1, len(frames) + 1))
        owners = [f.data["chat_request_id"] for f in frames]
        assert owners == sorted(owners, key=[first, second].index)
        assert set(owners) == {first, second}
        assert other[0].id == "1"

    asyncio.run(main())


def test_every_event_names_its_reply_request() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        fake.script(
            session_id,
            Turn().text("hi").notification("mcp-call-7", {"method": "notifications/progress"}),
        )
        async with fake.client() as client:
            request_id = await start_reply(client, session_id)
            async with open_events(client, session_id) as events:
                frames = await events.events_until("Finish")
        assert [f.type for f in frames] == ["Message", "Notification", "Finish"]
        for frame in frames:
            assert frame.data["chat_request_id"] == request_id
        message, notification, finish = (f.data for f in frames)
        assert message["request_id"] == finish["request_id"] == request_id
        assert notification["request_id"] == "mcp-call-7"  # an event's own request_id stays

    asyncio.run(main())


async def _session_with_events(fake: FakeGoose, chunks: int) -> tuple[str, list[int]]:
    session_id = fake.create_session()
    fake.script(session_id, Turn().text(*(f"c{n} " for n in range(chunks))))
    async with fake.client() as client:
        await start_reply(client, session_id)
    await fake.wait_idle()
    return session_id, [event_id for event_id, _ in fake.buffered_events(session_id)]


@pytest.mark.parametrize("header", [None, "", "abc", "-3", "0", "1.5", "18446744073709551616"])
def test_a_missing_or_unreadable_or_zero_cursor_replays_the_whole_buffer(
    header: str | None,
) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id, ids = await _session_with_events(fake, 4)
        async with fake.client() as client, open_events(client, session_id, header) as events:
            frames = await events.events_until("Finish")
        assert [int(f.id or 0) for f in frames] == ids == [1, 2, 3, 4, 5]

    asyncio.run(main())


@pytest.mark.parametrize(("header", "replayed"), [("3", "4 5"), ("+3", "4 5"), ("1", "2 3 4 5")])
def test_a_cursor_within_the_buffer_replays_what_follows_it(header: str, replayed: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id, _ = await _session_with_events(fake, 4)
        async with fake.client() as client, open_events(client, session_id, header) as events:
            frames = await events.events_until("Finish")
        assert [f.id for f in frames] == replayed.split()

    asyncio.run(main())


def test_the_buffer_keeps_the_last_512_events() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id, ids = await _session_with_events(fake, 600)  # 601 events with the Finish
        assert ids == list(range(90, 602))
        async with fake.client() as client, open_events(client, session_id) as events:
            frames = await events.events_until("Finish")
        assert (frames[0].id, len(frames)) == ("90", 512)

    asyncio.run(main())


@pytest.mark.parametrize("header", ["1", "3"])
def test_a_cursor_below_the_buffer_gets_one_too_far_behind_frame_and_the_end(header: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS, replay_buffer_size=4)
        session_id, ids = await _session_with_events(fake, 6)  # ids 4..7 kept
        assert ids == [4, 5, 6, 7]
        async with fake.client() as client, open_events(client, session_id, header) as events:
            frames = await events.remaining_frames()
        assert [frame.lines for frame in frames] == [
            (
                "id: 0",
                'data: {"type":"Error","error":"Client too far behind — reload conversation"}',
            )
        ]
        assert frames[0].data == {"type": "Error", "error": TOO_FAR_BEHIND_ERROR}

    asyncio.run(main())


def test_a_cursor_above_the_newest_replays_nothing_then_live_events() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id, _ = await _session_with_events(fake, 2)  # ids 1..3
        async with fake.client() as client, open_events(client, session_id, "50") as events:
            await events.next_frame()  # a ping: the replay (none) is over
            request_id = await start_reply(client, session_id, "live")
            frames = await events.events_until("Finish")
        assert frames[0].id == "4"  # goose's own next id, not one after the cursor
        assert {f.data["chat_request_id"] for f in frames} == {request_id}

    asyncio.run(main())


def test_in_flight_requests_are_announced_first_without_an_id() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        fake.script(session_id, Turn().text("partial").hang())
        async with fake.client() as client:
            request_id = await start_reply(client, session_id)
            async with open_events(client, session_id, "1") as events:
                first = await events.next_frame()
                second = await events.next_frame()
            await client.post(f"/sessions/{session_id}/cancel", json={"request_id": request_id})
            await fake.wait_idle()
            async with open_events(client, session_id) as events:
                after = await events.next_frame()
        assert first is not None and first.lines == (
            f'data: {{"type":"ActiveRequests","request_ids":["{request_id}"]}}',
        )
        assert second is not None and second.is_comment  # nothing to replay after id 1
        assert after is not None and after.id == "1"  # idle: no ActiveRequests frame

    asyncio.run(main())


def test_pings_are_numbered_comments() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        async with fake.client() as client, open_events(client, session_id) as events:
            frames = [await events.next_frame() for _ in range(3)]
        assert [f.lines if f else None for f in frames] == [
            (": ping 0",),
            (": ping 1",),
            (": ping 2",),
        ]

    asyncio.run(main())


def test_leaving_the_stream_does_not_cancel_the_turn() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        release = asyncio.Event()
        fake.script(session_id, Turn().text("before").pause(release).text("after"))
        async with fake.client() as client:
            await start_reply(client, session_id)
            async with open_events(client, session_id) as events:
                frames = await events.events_until("Message")
            assert frames[-1].data["message"]["content"][0]["text"] == "before"
            release.set()
            await fake.wait_idle()
        assert [e["type"] for _, e in fake.buffered_events(session_id)][-1] == "Finish"
        texts = [m["content"][0]["text"] for m in fake.conversation(session_id)]
        assert texts == ["hello", "before", "after"]

    asyncio.run(main())


def test_a_lagging_subscriber_is_disconnected_and_resumes_by_cursor() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS, subscriber_queue_size=4)
        session_id = fake.create_session()
        release = asyncio.Event()
        fake.script(session_id, Turn().pause(release).text(*(f"c{n}" for n in range(60))))
        async with fake.client() as client:
            await start_reply(client, session_id)
            async with open_events(client, session_id) as events:
                await events.next_frame()  # ActiveRequests: the stream is live
                release.set()
                await fake.wait_idle()  # 61 events published while this reader read nothing
                seen = await events.rest()
            assert "Finish" not in [f.type for f in seen]  # dropped before the end
            cursor = seen[-1].id if seen else None
            async with open_events(client, session_id, cursor) as events:
                resumed = await events.events_until("Finish")
        ids = [int(f.id or 0) for f in seen + resumed]
        assert ids == list(range(1, 62))

    asyncio.run(main())
