"""goose's approve mode in the fake: tool confirmations, elicitations, and how each wait ends."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest

from gateway_kit.testing import (
    DECLINED_RESPONSE,
    ELICITATION_TIMEOUT_TEXT,
    ConfirmationCall,
    FakeGoose,
    Turn,
    elicitation_response,
    goose_validator,
)
from tests.support.docs import PYTHON_BLOCK, section
from tests.test_docs import TESTING_PLUGINS_DOC

from .frames import FAST_PINGS, Frame, FrameReader, open_events, reply, start_reply

SHELL = "developer__shell"
DOCUMENTED = "## Approve mode in the fake goose"
BUSY = "Session already has an active request. Cancel it first."


def _fake(*turns: Turn) -> tuple[FakeGoose, str]:
    fake = FakeGoose(ping_interval=FAST_PINGS)
    session_id = fake.create_session()
    fake.script(session_id, *turns)
    return fake, session_id


async def confirm(
    client: httpx.AsyncClient, session_id: str, tool_id: str, action: str = "allow_once"
) -> httpx.Response:
    """Answer a tool confirmation as a client does; the body is goose's own request schema."""
    body = {"id": tool_id, "action": action, "sessionId": session_id, "principalType": "Tool"}
    goose_validator("ConfirmToolActionRequest").validate(body)
    return await client.post("/action-required/tool-confirmation", json=body)


async def answer(
    client: httpx.AsyncClient, session_id: str, elicitation_id: str, data: Any, **options: Any
) -> httpx.Response:
    """Answer an elicitation with a reply of a fresh request id, as goose's clients do."""
    body = {
        "request_id": str(uuid.uuid4()),
        "user_message": elicitation_response(elicitation_id, data, **options),
    }
    goose_validator("SessionReplyRequest").validate(body)
    return await client.post(f"/sessions/{session_id}/reply", json=body)


def action(frame: Frame) -> dict[str, Any] | None:
    """The `actionRequired` data of a `Message` event, None for any other event."""
    if frame.type != "Message":
        return None
    content = frame.data["message"]["content"]
    if content and content[0]["type"] == "actionRequired":
        data: dict[str, Any] = content[0]["data"]
        return data
    return None


async def next_action(events: FrameReader) -> dict[str, Any]:
    """Read up to the next `actionRequired` message; its data."""
    while True:
        frame = await events.next_event()
        assert frame is not None, "the stream ended before an actionRequired message"
        if (data := action(frame)) is not None:
            return data


async def until_finished(events: FrameReader, *request_ids: str) -> list[Frame]:
    """Read until each of these requests has sent its `Finish`; the frames read."""
    frames: list[Frame] = []
    left = set(request_ids)
    while left:
        frame = await events.next_event()
        assert frame is not None, f"the stream ended before the Finish of {left}"
        frames.append(frame)
        if frame.type == "Finish":
            left.discard(frame.data["chat_request_id"])
    return frames


def of_request(frames: list[Frame], request_id: str) -> list[Frame]:
    return [f for f in frames if f.data.get("chat_request_id") == request_id]


def texts(frames: list[Frame]) -> list[str]:
    return [f.data["message"]["content"][0]["text"] for f in frames if f.type == "Message"]


def item_types(messages: list[dict[str, Any]]) -> list[str]:
    """The content types of these goose messages, in order."""
    return [item["type"] for message in messages for item in message["content"]]


def content_types(frames: list[Frame]) -> list[str]:
    return item_types([f.data["message"] for f in frames if f.type == "Message"])


def tool_results(frames: list[Frame]) -> list[tuple[str, list[dict[str, Any]], bool]]:
    """(id, content, isError) of every `toolResponse` among the frames."""
    return [
        (c["id"], c["toolResult"]["value"]["content"], c["toolResult"]["value"]["isError"])
        for f in frames
        if f.type == "Message"
        for c in f.data["message"]["content"]
        if c["type"] == "toolResponse"
    ]


# --- tool confirmations


def test_the_confirmation_request_follows_the_tool_request_and_is_not_kept() -> None:
    async def main() -> None:
        turn = Turn().confirm_tool(SHELL, {"command": "ls"}, prompt="Run it?", call_id="call_1")
        fake, session_id = _fake(turn)
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id, "list files")
            request = await events.next_event()
            data = await next_action(events)
            assert fake.pending_confirmations(session_id) == ["call_1"]  # from the request on
            stored = fake.conversation(session_id)
            assert (await confirm(client, session_id, "call_1")).status_code == 200
            await events.events_until("Finish")
        assert request is not None and content_types([request]) == ["toolRequest"]
        assert data == {
            "actionType": "toolConfirmation",
            "id": "call_1",
            "toolName": SHELL,
            "arguments": {"command": "ls"},
            "prompt": "Run it?",
        }
        assert item_types(stored[1:]) == ["toolRequest"]  # after the user's message
        assert item_types(fake.conversation(session_id)[1:]) == [
            "toolRequest",
            "toolResponse",
        ]

    asyncio.run(main())


@pytest.mark.parametrize("allow", ["allow_once", "always_allow"])
def test_an_allowed_tool_answers_with_its_result(allow: str) -> None:
    async def main() -> None:
        turn = Turn().confirm_tool(SHELL, {"command": "ls"}, result="a.txt").text("Done.")
        fake, session_id = _fake(turn)
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            tool_id = (await next_action(events))["id"]
            await confirm(client, session_id, tool_id, allow)
            frames = await events.events_until("Finish")
        assert tool_results(frames) == [(tool_id, [{"type": "text", "text": "a.txt"}], False)]
        assert frames[-2].data["message"]["content"] == [{"type": "text", "text": "Done."}]
        assert {f.data["chat_request_id"] for f in frames} == {request_id}
        assert fake.pending_confirmations(session_id) == []

    asyncio.run(main())


@pytest.mark.parametrize("deny", ["deny_once", "always_deny"])
def test_a_denied_tool_answers_with_goose_s_declined_text(deny: str) -> None:
    async def main() -> None:
        turn = Turn().confirm_tool(SHELL, {"command": "rm -rf /"}, result="gone").text("OK.")
        fake, session_id = _fake(turn)
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            tool_id = (await next_action(events))["id"]
            await confirm(client, session_id, tool_id, deny)
            frames = await events.events_until("Finish")
        declined = [{"type": "text", "text": DECLINED_RESPONSE}]
        assert tool_results(frames) == [(tool_id, declined, False)]
        assert "gone" not in str(fake.conversation(session_id))

    asyncio.run(main())


def test_the_cancel_action_ends_the_turn_without_a_tool_response() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().confirm_tool(SHELL, result="x").text("never"))
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            tool_id = (await next_action(events))["id"]
            await confirm(client, session_id, tool_id, "cancel")
            frames = await events.events_until("Finish")
        assert [f.type for f in frames] == ["Finish"]
        assert item_types(fake.conversation(session_id)[1:]) == ["toolRequest"]
        assert fake.active_request_ids(session_id) == []

    asyncio.run(main())


def test_any_confirmation_gets_200_and_an_empty_object() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().confirm_tool(SHELL, call_id="call_1"))
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            await next_action(events)
            answers = [
                await confirm(client, session_id, "call_unknown"),
                await confirm(client, "20990101_404", "call_1"),  # no such session
                await confirm(client, session_id, "call_1"),
                await confirm(client, session_id, "call_1", "deny_once"),  # already answered
            ]
            await events.events_until("Finish")
        assert [(a.status_code, a.json()) for a in answers] == [(200, {})] * 4
        assert fake.confirmation_calls == [
            ConfirmationCall(session_id, "call_unknown", "allow_once", 200),
            ConfirmationCall("20990101_404", "call_1", "allow_once", 200),
            ConfirmationCall(session_id, "call_1", "allow_once", 200),
            ConfirmationCall(session_id, "call_1", "deny_once", 200),
        ]
        fake.clear_calls()
        assert fake.confirmation_calls == []

    asyncio.run(main())


@pytest.mark.parametrize(
    "body",
    [
        {"action": "allow_once", "sessionId": "s"},
        {"id": "call_1", "sessionId": "s"},
        {"id": "call_1", "action": "allow_once"},
        {"id": "call_1", "action": "approve", "sessionId": "s"},
        {"id": 1, "action": "allow_once", "sessionId": "s"},
        {"id": "call_1", "action": "allow_once", "sessionId": "s", "principalType": "User"},
        ["call_1"],
    ],
)
def test_a_confirmation_of_the_wrong_shape_is_a_422(body: Any) -> None:
    async def main() -> None:
        fake = FakeGoose()
        async with fake.client() as client:
            response = await client.post("/action-required/tool-confirmation", json=body)
        assert response.status_code == 422
        assert set(response.json()) == {"message"}
        assert [call.status for call in fake.confirmation_calls] == [422]
        assert not goose_validator("ConfirmToolActionRequest").is_valid(body)

    asyncio.run(main())


def two_tools(turn: Turn) -> Turn:
    """Two tool calls to confirm, call_a then call_b, after what `turn` does."""
    return turn.confirm_tool(SHELL, call_id="call_a", result="ran a").confirm_tool(
        SHELL, call_id="call_b", result="ran b"
    )


def results_by_id(frames: list[Frame]) -> dict[str, str]:
    return {i: content[0]["text"] for i, content, _ in tool_results(frames)}


def stored_results(fake: FakeGoose, session_id: str) -> dict[str, str]:
    """The text of each tool result kept in the session's conversation, by tool request id."""
    return {
        item["id"]: item["toolResult"]["value"]["content"][0]["text"]
        for message in fake.conversation(session_id)
        for item in message["content"]
        if item["type"] == "toolResponse"
    }


def test_a_confirmation_for_another_id_is_dropped_by_the_waiting_step() -> None:
    async def main() -> None:
        fake, session_id = _fake(two_tools(Turn()))
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            assert (await next_action(events))["id"] == "call_a"
            await confirm(client, session_id, "call_b")  # taken by call_a's wait, and dropped
            await confirm(client, session_id, "call_a")
            assert (await next_action(events))["id"] == "call_b"
            assert fake.pending_confirmations(session_id) == ["call_b"]
            await confirm(client, session_id, "call_b", "deny_once")  # the one call_b gets
            await events.events_until("Finish")
        assert stored_results(fake, session_id) == {"call_a": "ran a", "call_b": DECLINED_RESPONSE}

    asyncio.run(main())


def test_confirmations_sent_before_the_waits_are_kept_for_their_own_ids() -> None:
    async def main() -> None:
        reached, release = asyncio.Event(), asyncio.Event()
        fake, session_id = _fake(two_tools(Turn().pause(release, reached=reached)))
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            await reached.wait()
            await confirm(client, session_id, "call_a")
            await confirm(client, session_id, "call_b")
            release.set()
            frames = await events.events_until("Finish")
        # In order: call_a's wait takes call_a and leaves call_b for the next wait.
        assert results_by_id(frames) == {"call_a": "ran a", "call_b": "ran b"}

    asyncio.run(main())


def test_a_confirmation_for_a_later_id_sent_early_is_lost_to_the_first_wait() -> None:
    async def main() -> None:
        reached, release = asyncio.Event(), asyncio.Event()
        fake, session_id = _fake(two_tools(Turn().pause(release, reached=reached)))
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            await reached.wait()
            await confirm(client, session_id, "call_b")  # call_a's wait will drop it
            release.set()
            assert (await next_action(events))["id"] == "call_a"
            await confirm(client, session_id, "call_a")
            assert (await next_action(events))["id"] == "call_b"
            await confirm(client, session_id, "call_b", "deny_once")
            await events.events_until("Finish")
        assert stored_results(fake, session_id) == {"call_a": "ran a", "call_b": DECLINED_RESPONSE}

    asyncio.run(main())


def test_a_session_waiting_for_a_confirmation_is_busy() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().confirm_tool(SHELL))
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            tool_id = (await next_action(events))["id"]
            refused = await reply(client, session_id, "meanwhile")
            assert fake.active_request_ids(session_id) == [request_id]
            await confirm(client, session_id, tool_id)
            await events.events_until("Finish")
            assert (await reply(client, session_id, "after")).status_code == 200
            await fake.wait_idle()
        assert (refused.status_code, refused.json()) == (400, {"message": BUSY})

    asyncio.run(main())


def test_cancelling_the_reply_ends_the_wait_with_finish() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().confirm_tool(SHELL).text("never"))
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            tool_id = (await next_action(events))["id"]
            cancel = {"request_id": request_id}
            assert (await client.post(f"/sessions/{session_id}/cancel", json=cancel)).is_success
            frames = await events.events_until("Finish")
            await fake.wait_idle()
            assert fake.pending_confirmations(session_id) == []
            await confirm(client, session_id, tool_id)  # too late: nobody waits
        assert [f.type for f in frames] == ["Finish"]
        assert tool_results(frames) == []

    asyncio.run(main())


def test_a_restart_loses_the_wait() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().confirm_tool(SHELL).text("never"))
        async with fake.client() as client:
            async with open_events(client, session_id) as events:
                await start_reply(client, session_id)
                tool_id = (await next_action(events))["id"]
                fake.restart()
                assert await events.rest() == []  # no Finish, no event after the restart
            await fake.wait_idle()
            assert fake.pending_confirmations(session_id) == []
            assert fake.active_request_ids(session_id) == []
            assert (await confirm(client, session_id, tool_id)).status_code == 200
            await fake.wait_idle()
        assert fake.buffered_events(session_id) == []
        assert item_types(fake.conversation(session_id)[1:]) == ["toolRequest"]

    asyncio.run(main())


# --- elicitations


def test_an_elicitation_is_answered_by_a_reply_while_the_session_is_busy() -> None:
    async def main() -> None:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        fake, session_id = _fake(Turn().elicit("Your name?", schema).text("Bye."))
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            asked = await next_action(events)
            elicitation_id = asked["id"]
            assert fake.pending_confirmations(session_id) == [elicitation_id]
            stored = fake.conversation(session_id)
            refused = await reply(client, session_id, "meanwhile")
            answered = await answer(client, session_id, elicitation_id, {"name": "Ada"})
            answer_id = answered.json()["request_id"]
            frames = await until_finished(events, request_id, answer_id)
        assert asked == {
            "actionType": "elicitation",
            "id": elicitation_id,
            "message": "Your name?",
            "requested_schema": schema,
        }
        assert (refused.status_code, answered.status_code) == (400, 200)
        assert [c.status for c in fake.reply_calls] == [200, 400, 200]
        assert fake.reply_calls[2].request_id == answer_id
        assert [f.type for f in of_request(frames, answer_id)] == ["Finish"]
        assert texts(of_request(frames, request_id)) == ['Thanks: {"name": "Ada"}', "Bye."]
        assert stored == fake.conversation(session_id)[:1]  # the request was not kept
        kept = fake.conversation(session_id)
        assert [m["role"] for m in kept] == ["user", "user", "assistant", "assistant"]
        assert kept[1]["content"][0]["data"]["user_data"] == {"name": "Ada"}
        assert fake.pending_confirmations(session_id) == []

    asyncio.run(main())


def test_an_elicitation_says_the_answer_text_it_was_given() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().elicit("Port?", answer_text="Using it."))
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            answered = await answer(client, session_id, (await next_action(events))["id"], {})
            frames = await until_finished(events, request_id, answered.json()["request_id"])
        assert texts(of_request(frames, request_id)) == ["Using it."]

    asyncio.run(main())


@pytest.mark.parametrize("refusal", ["decline", "cancel"])
def test_a_refused_elicitation_goes_on_without_the_data(refusal: str) -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().elicit("Token?", answer_text="Got it."))
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            elicitation_id = (await next_action(events))["id"]
            answered = await answer(client, session_id, elicitation_id, {}, action=refusal)
            frames = await until_finished(events, request_id, answered.json()["request_id"])
        (text,) = texts(of_request(frames, request_id))
        assert refusal in text and text != "Got it."

    asyncio.run(main())


def test_an_elicitation_left_unanswered_times_out_and_the_turn_goes_on() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().elicit("Anyone?", timeout=0.05).text("Moving on."))
        async with fake.client() as client, open_events(client, session_id) as events:
            request_id = await start_reply(client, session_id)
            elicitation_id = (await next_action(events))["id"]
            frames = await events.events_until("Finish")
            late = await answer(client, session_id, elicitation_id, {"x": 1})
            failed = await events.events_until("Finish")
        assert texts(frames) == [ELICITATION_TIMEOUT_TEXT, "Moving on."]
        assert {f.data["chat_request_id"] for f in frames} == {request_id}
        assert late.status_code == 200
        assert texts(failed) == [
            f"Failed to submit elicitation response: Request not found: {elicitation_id}"
        ]

    asyncio.run(main())


def test_an_answer_nobody_waits_for_gets_goose_s_error_then_finish() -> None:
    async def main() -> None:
        fake, session_id = _fake()
        async with fake.client() as client, open_events(client, session_id) as events:
            answered = await answer(client, session_id, "elicit_nobody", {"x": 1})
            frames = await events.events_until("Finish")
            await fake.wait_idle()
        request_id = answered.json()["request_id"]
        assert [(f.type, f.data["chat_request_id"]) for f in frames] == [
            ("Message", request_id),
            ("Finish", request_id),
        ]
        message = frames[0].data["message"]
        assert message["role"] == "assistant"
        assert message["content"][0]["text"].startswith("Failed to submit elicitation response")
        assert fake.conversation(session_id) == []  # goose keeps the answer once delivered

    asyncio.run(main())


def test_an_answer_sent_to_another_session_does_not_reach_the_elicitation() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().elicit("Name?"))
        other = fake.create_session()
        async with fake.client() as client, open_events(client, session_id) as events:
            await start_reply(client, session_id)
            elicitation_id = (await next_action(events))["id"]
            async with open_events(client, other) as other_events:
                await answer(client, other, elicitation_id, {"name": "Eve"})
                failed = await other_events.events_until("Finish")
            assert fake.pending_confirmations(session_id) == [elicitation_id]
            await answer(client, session_id, elicitation_id, {"name": "Ada"})
            await fake.wait_idle()
        error = failed[0].data["message"]["content"][0]["text"]
        assert f"belongs to session {session_id}, not {other}" in error

    asyncio.run(main())


@pytest.mark.parametrize(
    "data",
    [
        {"actionType": "elicitationResponse", "user_data": {}},
        {"actionType": "elicitationResponse", "id": 7, "user_data": {}},
        {"actionType": "elicitationResponse", "id": "e1"},
    ],
)
def test_a_malformed_elicitation_response_is_a_422(data: dict[str, Any]) -> None:
    async def main() -> None:
        fake, session_id = _fake()
        content = [{"type": "actionRequired", "data": data}]
        message = {**elicitation_response("e1", {}), "content": content}
        body = {"request_id": str(uuid.uuid4()), "user_message": message}
        async with fake.client() as client:
            response = await client.post(f"/sessions/{session_id}/reply", json=body)
        assert response.status_code == 422 and set(response.json()) == {"message"}
        assert fake.active_request_ids(session_id) == [] and fake.conversation(session_id) == []
        assert not goose_validator("SessionReplyRequest").is_valid(body)

    asyncio.run(main())


def test_a_restart_loses_the_elicitation() -> None:
    async def main() -> None:
        fake, session_id = _fake(Turn().elicit("Name?").text("never"))
        async with fake.client() as client:
            async with open_events(client, session_id) as events:
                await start_reply(client, session_id)
                elicitation_id = (await next_action(events))["id"]
                fake.restart()
                assert await events.rest() == []
            await fake.wait_idle()
            assert fake.pending_confirmations(session_id) == []
            async with open_events(client, session_id) as events:
                await answer(client, session_id, elicitation_id, {"name": "Ada"})
                failed = await events.events_until("Finish")
        assert "Request not found" in failed[0].data["message"]["content"][0]["text"]

    asyncio.run(main())


# --- goose's schemas


async def _approve_mode_frames() -> list[Frame]:
    """Every event of approve mode, as sent: each way a confirmation and an elicitation end."""
    fake, session_id = _fake(
        Turn()
        .confirm_tool(SHELL, {"command": "ls"}, result="a.txt", prompt="Allow?")
        .confirm_tool(SHELL, {"command": "rm"})
        .elicit("Name?", {"type": "object"})
        .elicit("Colour?", timeout=0.01),
        Turn().confirm_tool("write_file", {"path": "x"}).text("never"),
    )
    async with fake.client() as client:
        async with open_events(client, session_id) as events:
            await start_reply(client, session_id)
            await confirm(client, session_id, (await next_action(events))["id"], "allow_once")
            await confirm(client, session_id, (await next_action(events))["id"], "deny_once")
            await answer(client, session_id, (await next_action(events))["id"], {"name": "Ada"})
            assert (await next_action(events))["message"] == "Colour?"  # left to time out
            await answer(client, session_id, "elicit_nobody", {})
            await fake.wait_idle()
            await start_reply(client, session_id)
            await confirm(client, session_id, (await next_action(events))["id"], "cancel")
            await fake.wait_idle()
        async with open_events(client, session_id) as events:
            frames = [await events.next_event() for _ in fake.buffered_events(session_id)]
    return [frame for frame in frames if frame is not None]


def test_every_approve_mode_event_is_a_goose_message_event() -> None:
    frames = asyncio.run(_approve_mode_frames())
    validator = goose_validator("MessageEvent")
    for frame in frames:
        errors = [e.message for e in validator.iter_errors(frame.data)]
        assert errors == [], (frame.lines, errors)
    actions = [data["actionType"] for f in frames if (data := action(f)) is not None]
    assert actions == ["toolConfirmation"] * 2 + ["elicitation"] * 2 + ["toolConfirmation"]
    assert set(content_types(frames)) == {"text", "toolRequest", "toolResponse", "actionRequired"}
    confirmation = next(f for f in frames if action(f) is not None).data["message"]
    assert confirmation["metadata"] == {"userVisible": True, "agentVisible": False}


def test_the_documented_example_works_as_shown() -> None:
    (module,) = PYTHON_BLOCK.findall(section(TESTING_PLUGINS_DOC, DOCUMENTED))
    namespace: dict[str, Any] = {"__name__": "approve_mode_example"}
    exec(compile(module, "docs/testing_plugins.md", "exec"), namespace)
    tests = [test for name, test in namespace.items() if name.startswith("test_")]
    assert len(tests) == 1
    for test in tests:
        test()
