"""Scripted turns: what each kind of step puts on the stream and in the session."""

from __future__ import annotations

import asyncio
import functools
import uuid

import pytest

from gateway_kit.testing import TEXT_ONLY_MODEL_ERROR, FakeGoose, Turn, echo_turn, user_message

from .frames import FAST_PINGS, Frame, open_events, reply, start_reply


async def _run(turn: Turn, text: str = "hello") -> tuple[FakeGoose, str, str, list[Frame]]:
    """Run one scripted reply to its end; the fake, session, request id and the events."""
    fake = FakeGoose(ping_interval=FAST_PINGS)
    session_id = fake.create_session()
    fake.script(session_id, turn)
    async with fake.client() as client:
        request_id = await start_reply(client, session_id, text)
        await fake.wait_idle()
        async with open_events(client, session_id) as events:
            frames = [await events.next_event() for _ in fake.buffered_events(session_id)]
    return fake, session_id, request_id, [f for f in frames if f is not None]


def test_text_chunks_share_one_message_id_and_are_stored_merged() -> None:
    async def main() -> None:
        fake, session_id, _, frames = await _run(Turn().text("Hel", "lo, ", "world"))
        messages = [f.data["message"] for f in frames if f.type == "Message"]
        assert len({m["id"] for m in messages}) == 1
        assert [m["content"][0]["text"] for m in messages] == ["Hel", "lo, ", "world"]
        assert [m["role"] for m in messages] == ["assistant"] * 3
        stored = fake.conversation(session_id)
        assert [m["role"] for m in stored] == ["user", "assistant"]
        assert stored[1]["content"] == [{"type": "text", "text": "Hello, world"}]
        assert stored[1]["id"] == messages[0]["id"]

    asyncio.run(main())


def test_a_tool_call_sends_the_request_then_the_response() -> None:
    async def main() -> None:
        turn = Turn().tool_call("developer__shell", {"command": "ls"}, result="a.txt")
        _, _, _, frames = await _run(turn)
        request, response = (f.data["message"] for f in frames if f.type == "Message")
        (call,) = request["content"]
        (result,) = response["content"]
        assert (request["role"], response["role"]) == ("assistant", "user")
        assert call["type"] == "toolRequest" and result["type"] == "toolResponse"
        assert call["id"] == result["id"]
        assert call["toolCall"]["value"] == {
            "name": "developer__shell",
            "arguments": {"command": "ls"},
        }
        assert result["toolResult"]["value"]["content"] == [{"type": "text", "text": "a.txt"}]

    asyncio.run(main())


def test_read_image_returns_an_image_block() -> None:
    async def main() -> None:
        _, _, _, frames = await _run(Turn().read_image("shot.png", data="AAAA"))
        request, response = (f.data["message"] for f in frames if f.type == "Message")
        assert request["content"][0]["toolCall"]["value"]["name"] == "read_image"
        image = response["content"][0]["toolResult"]["value"]["content"][0]
        assert image == {"type": "image", "data": "AAAA", "mimeType": "image/png"}

    asyncio.run(main())


def test_an_error_in_the_work_loop_is_followed_by_finish_stop() -> None:
    async def main() -> None:
        _, _, request_id, frames = await _run(Turn().text("Look").error(TEXT_ONLY_MODEL_ERROR))
        assert [f.type for f in frames] == ["Message", "Error", "Finish"]
        assert frames[1].data["error"] == TEXT_ONLY_MODEL_ERROR
        assert frames[2].data["reason"] == "stop"
        assert frames[1].data["chat_request_id"] == request_id

    asyncio.run(main())


def test_an_early_failure_sends_error_without_finish_and_frees_the_session() -> None:
    async def main() -> None:
        fake, session_id, _, frames = await _run(Turn().error("no agent", finish=False))
        assert [f.type for f in frames] == ["Error"]
        assert [e["type"] for _, e in fake.buffered_events(session_id)] == ["Error"]
        assert fake.conversation(session_id) == []  # the agent never saw the message
        async with fake.client() as client:
            assert (await reply(client, session_id)).status_code == 200
        await fake.wait_idle()

    asyncio.run(main())


def test_usage_reports_the_last_message_and_accumulates_in_token_state() -> None:
    async def main() -> None:
        turn = Turn().text("a").usage(10, 2).text("b").usage(20, 3)
        _, _, _, frames = await _run(turn)
        messages = [f.data for f in frames if f.type == "Message"]
        usages = [f.data for f in frames if f.type == "MessageUsage"]
        assert [u["message_id"] for u in usages] == [m["message"]["id"] for m in messages]
        assert usages[1]["usage"] == {"inputTokens": 20, "outputTokens": 3, "totalTokens": 23}
        finish = frames[-1].data["token_state"]
        assert (finish["accumulatedInputTokens"], finish["accumulatedOutputTokens"]) == (30, 5)
        assert messages[1]["token_state"]["accumulatedTotalTokens"] == 12

    asyncio.run(main())


def test_update_conversation_replaces_the_history() -> None:
    async def main() -> None:
        summary = user_message("summary of before")
        fake, session_id, _, frames = await _run(Turn().update_conversation([summary]).text("ok"))
        assert frames[0].data["conversation"] == [summary]
        assert [m["content"][0]["text"] for m in fake.conversation(session_id)] == [
            "summary of before",
            "ok",
        ]

    asyncio.run(main())


def test_delays_and_raw_messages_arrive_in_order() -> None:
    async def main() -> None:
        raw = {"role": "assistant", "content": [{"type": "text", "text": "raw"}], "metadata": {}}
        _, _, _, frames = await _run(Turn().delay(0.01).message(raw).delay(0.01).text("end"))
        texts = [f.data["message"]["content"][0]["text"] for f in frames if f.type == "Message"]
        assert texts == ["raw", "end"]

    asyncio.run(main())


@pytest.mark.parametrize("chunk_delay", [None, 0.001])
def test_the_default_turn_echoes_the_user_message_streamed(chunk_delay: float | None) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        if chunk_delay is not None:
            fake.default_turn = functools.partial(echo_turn, chunk_delay=chunk_delay)
        session_id = fake.create_session()
        async with fake.client() as client:
            await start_reply(client, session_id, "the quick brown fox jumps")
            async with open_events(client, session_id) as events:
                frames = await events.events_until("Finish")
        messages = [f.data["message"] for f in frames if f.type == "Message"]
        assert len(messages) > 1 and len({m["id"] for m in messages}) == 1
        assert "".join(m["content"][0]["text"] for m in messages) == "the quick brown fox jumps"
        assert [f.type for f in frames][-2:] == ["MessageUsage", "Finish"]

    asyncio.run(main())


def test_a_pause_holds_the_turn_until_released_and_says_when_reached() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        reached, release = asyncio.Event(), asyncio.Event()
        fake.script(session_id, Turn().text("one").pause(release, reached=reached).text("two"))
        async with fake.client() as client:
            await start_reply(client, session_id)
            await reached.wait()
            assert [e["type"] for _, e in fake.buffered_events(session_id)] == ["Message"]
            release.set()
            await fake.wait_idle()
        assert len(fake.buffered_events(session_id)) == 3

    asyncio.run(main())


def test_a_cancelled_turn_finishes_with_stop_under_its_own_request_id() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        wind_down = asyncio.Event()
        fake.script(session_id, Turn().text("partial").hang().hold_finish(wind_down))
        async with fake.client() as client:
            old = await start_reply(client, session_id)
            async with open_events(client, session_id) as events:
                await events.events_until("Message")
                await client.post(f"/sessions/{session_id}/cancel", json={"request_id": old})
                new = await start_reply(client, session_id, "next")  # accepted at once
                new_frames = await events.events_until("Finish")
                wind_down.set()
                late = await events.events_until("Finish")
        assert {f.data["chat_request_id"] for f in new_frames} == {new}
        assert [f.type for f in late] == ["Finish"]
        assert late[0].data["chat_request_id"] == old and late[0].data["reason"] == "stop"
        assert int(late[0].id or 0) > int(new_frames[-1].id or 0)
        await fake.wait_idle()

    asyncio.run(main())


def test_override_conversation_replaces_the_history_before_the_turn() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        fake.script(session_id, Turn().text("answer"))
        async with fake.client() as client:
            await start_reply(client, session_id, "first")
            await fake.wait_idle()
            body = {
                "request_id": str(uuid.uuid4()),
                "user_message": user_message("again"),
                "override_conversation": [user_message("edited")],
            }
            assert (
                await client.post(f"/sessions/{session_id}/reply", json=body)
            ).status_code == 200
            await fake.wait_idle()
        texts = [m["content"][0]["text"] for m in fake.conversation(session_id)]
        assert texts == ["edited", "again", "again"]

    asyncio.run(main())


def test_scripted_turns_are_used_in_order_then_the_echo() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        fake.script(session_id, Turn().text("one"), Turn().text("two"))
        async with fake.client() as client:
            for text in ("a", "b", "c"):
                await start_reply(client, session_id, text)
                await fake.wait_idle()
        texts = [m["content"][0]["text"] for m in fake.conversation(session_id)]
        assert texts == ["a", "one", "b", "two", "c", "c"]

    asyncio.run(main())


def test_a_turn_cannot_go_on_after_an_error() -> None:
    with pytest.raises(ValueError):
        Turn().error("boom").text("more")
    with pytest.raises(ValueError):
        Turn().text()


def test_script_next_session_scripts_the_sessions_agent_start_makes_in_order() -> None:
    async def main() -> list[list[str]]:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        fake.script_next_session(Turn().text("one"), Turn().text("two"))
        fake.script_next_session(Turn().text("clean"))
        conversations = []
        async with fake.client() as client:
            for replies in (("a", "b", "c"), ("d", "e"), ("f",)):
                started = await client.post("/agent/start", json={"working_dir": "/tmp"})
                session_id = started.json()["id"]
                for text in replies:
                    await start_reply(client, session_id, text)
                    await fake.wait_idle()
                texts = [m["content"][0]["text"] for m in fake.conversation(session_id)]
                conversations.append(texts)
        return conversations

    first, second, third = asyncio.run(main())
    assert first == ["a", "one", "b", "two", "c", "c"]
    assert second == ["d", "clean", "e", "e"]
    assert third == ["f", "f"]  # no script left: the echo
