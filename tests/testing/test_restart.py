"""`fake.restart()`: goosed's memory is lost, its sessions on disk are not."""

from __future__ import annotations

import asyncio

from gateway_kit.testing import FakeGoose, Turn

from .frames import FAST_PINGS, open_events, start_reply


def test_ids_start_again_at_one_and_the_replay_buffer_is_empty() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        async with fake.client() as client:
            await start_reply(client, session_id, "before restart")
            await fake.wait_idle()
            assert fake.buffered_events(session_id)[-1][0] > 1
            fake.restart()
            async with open_events(client, session_id) as events:
                first = await events.next_frame()
                request_id = await start_reply(client, session_id, "after")
                frames = await events.events_until("Finish")
        assert first is not None and first.is_comment  # nothing replayed
        assert frames[0].id == "1"
        assert {f.data["chat_request_id"] for f in frames} == {request_id}

    asyncio.run(main())


def test_sessions_and_conversations_survive() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        async with fake.client() as client:
            await start_reply(client, session_id, "kept")
            await fake.wait_idle()
            fake.restart()
            response = await client.get(f"/sessions/{session_id}")
        assert response.status_code == 200
        assert [m["content"][0]["text"] for m in response.json()["conversation"]] == [
            "kept",
            "kept",
        ]

    asyncio.run(main())


def test_open_event_streams_are_closed() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        async with fake.client() as client, open_events(client, session_id) as events:
            await events.next_frame()
            fake.restart()
            assert await events.rest() == []  # the stream ends, no event after the restart

    asyncio.run(main())


def test_active_requests_are_gone_and_their_turns_send_nothing_more() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        fake.script(session_id, Turn().text("started").hang().text("never"))
        async with fake.client() as client:
            old = await start_reply(client, session_id)
            fake.restart()
            await fake.wait_idle()
            assert fake.active_request_ids(session_id) == []
            new = await start_reply(client, session_id)  # not refused as busy
            async with open_events(client, session_id) as events:
                frames = await events.events_until("Finish")
        assert frames[0].id == "1"  # no ActiveRequests frame, no event of the old request
        assert {f.data["chat_request_id"] for f in frames} == {new} != {old}

    asyncio.run(main())


def test_a_cursor_from_before_the_restart_is_misread() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        fake.script(session_id, Turn().text(*"abcdefgh"))  # ids 1..9
        async with fake.client() as client:
            await start_reply(client, session_id)
            await fake.wait_idle()
            fake.restart()
            # Above the newest id: nothing replayed, then live events from id 1.
            async with open_events(client, session_id, "9") as events:
                await events.next_frame()
                await start_reply(client, session_id, "one two three")
                live = await events.events_until("Finish")
            # Once new ids pass the old cursor, it replays from the wrong point.
            await start_reply(client, session_id, "four five six seven")
            await fake.wait_idle()
            async with open_events(client, session_id, "5") as events:
                replayed = await events.events_until("Finish")
        assert live[0].id == "1"
        assert replayed[0].id == "6"

    asyncio.run(main())
