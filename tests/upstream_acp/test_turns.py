"""Turns on a real agent process over stdio: what it streams becomes goose's events."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from gateway_kit.testing.fake_acp_agent import AcpScript
from gateway_kit.upstream.acp import (
    AcpRequestError,
    AcpSessionBusy,
    AcpSessionNotFound,
    AcpTurn,
    PermissionRequest,
)
from tests.support.waiting import until
from tests.upstream_acp.agents import contents, fake_agent, run_turn, texts

DECLINED = "The user has declined to run this tool."


def test_a_turn_streams_thoughts_text_and_a_tool_call_as_goose_events(tmp_path: Path) -> None:
    script = (
        AcpScript()
        .thought("Let me ", "look")
        .text("Hel", "lo ", "there")
        .tool("developer__shell", {"command": "ls"}, result="a.txt", progress=True)
        .text("Done.")
        .usage(12, 3)
    )

    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            events, end = await run_turn(upstream, session.id, script.prompt(), request_id="r1")
            assert [e.type for e in events] == [
                *["Message"] * 2,  # the thought
                *["Message"] * 3,  # the text
                "Message",  # the tool request
                "AcpUpdate",  # its progress
                "Message",  # its response
                "Message",  # the last text
                "Finish",
            ]
            assert all(e.data["chat_request_id"] == "r1" for e in events)
            messages = [e.data["message"] for e in events if e.type == "Message"]
            thought, text, last = messages[0:2], messages[2:5], messages[7]
            assert [m["content"][0]["thinking"] for m in thought] == ["Let me ", "look"]
            assert len({m["id"] for m in text}) == 1  # clients merge the chunks by id
            assert {m["id"] for m in text}.isdisjoint({m["id"] for m in thought} | {last["id"]})
            assert texts(events) == ["Hel", "lo ", "there", "Done."]
            request, response = contents(events)[5:7]
            assert request["toolCall"]["value"] == {
                "name": "developer__shell",
                "arguments": {"command": "ls"},
            }
            assert response["id"] == request["id"]
            assert response["toolResult"]["value"] == {
                "content": [{"type": "text", "text": "a.txt"}],
                "isError": False,
            }
            assert events[-1] == end.event
            assert end.event.data["reason"] == "end_turn"
            assert end.event.data["token_state"] == {
                "inputTokens": 12,
                "outputTokens": 3,
                "totalTokens": 15,
            }

    asyncio.run(main())


def test_updates_are_written_in_the_order_the_agent_sent_them(tmp_path: Path) -> None:
    chunks = [f"{n} " for n in range(300)]

    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            events, _ = await run_turn(upstream, session.id, AcpScript().text(*chunks).prompt())
            assert texts(events) == chunks

    asyncio.run(main())


RAW_UPDATES: list[dict[str, Any]] = [
    {
        "sessionUpdate": "plan",
        "entries": [{"content": "a", "priority": "high", "status": "pending"}],
    },
    {"sessionUpdate": "available_commands_update", "availableCommands": []},
    {"sessionUpdate": "current_mode_update", "currentModeId": "approve"},
    {"sessionUpdate": "session_info_update", "title": "A title"},
    # What claude-agent-acp sends and the SDK cannot parse: still read, kept, in order.
    {"sessionUpdate": "usage_update", "used": 1.5, "size": 200000, "cost": {"amount": 0.01}},
    {"sessionUpdate": "brand_new_kind", "anything": [1, 2]},
]


def test_updates_of_every_kind_are_kept_in_order_with_the_text_around_them(
    tmp_path: Path,
) -> None:
    script = AcpScript().text("before")
    for update in RAW_UPDATES:
        script = script.update(update)
    script = script.text("after")

    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            events, end = await run_turn(upstream, session.id, script.prompt())
            assert [e.type for e in events] == ["Message", *["AcpUpdate"] * 6, "Message", "Finish"]
            assert [e.data["acp"] for e in events[1:7]] == RAW_UPDATES
            assert [e.data["update"] for e in events[1:7]] == [
                u["sessionUpdate"] for u in RAW_UPDATES
            ]
            assert texts(events) == ["before", "after"]
            assert end.event.data["reason"] == "end_turn"

    asyncio.run(main())


@pytest.mark.parametrize("reason", ["max_tokens", "max_turn_requests", "refusal"])
def test_the_turn_finishes_with_the_agents_stop_reason(tmp_path: Path, reason: str) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            events, end = await run_turn(
                upstream, session.id, AcpScript().text("x").stop(reason).prompt()
            )
            assert [e.type for e in events].count("Finish") == 1
            assert end.event.data["reason"] == reason
            assert end.result is not None and end.result.reported == reason

    asyncio.run(main())


def test_the_agents_error_ends_the_turn_with_one_error(tmp_path: Path) -> None:
    failure = "Error in agent response stream: provider said 500"

    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            script = AcpScript().text("partial").error(data=failure)
            events, end = await run_turn(upstream, session.id, script.prompt())
            assert [e.type for e in events] == ["Message", "Error"]
            assert failure in end.event.data["error"]
            assert end.event.data["acp"] == {
                "error": {"code": -32603, "message": "Internal error", "data": failure}
            }
            assert isinstance(end.error, AcpRequestError) and end.error.code == -32603
            # The agent is still there: the next turn works.
            _, again = await run_turn(upstream, session.id, "still here")
            assert again.event.data["reason"] == "end_turn"

    asyncio.run(main())


async def allow_once(request: PermissionRequest) -> str:
    return "allow_once"


def test_a_permission_request_goes_to_the_callback_with_the_tool_named(tmp_path: Path) -> None:
    asked: list[PermissionRequest] = []

    async def decide(request: PermissionRequest) -> str:
        asked.append(request)
        return "allow_once"

    script = AcpScript().tool(
        "developer__shell", {"command": "ls"}, permission=True, result="a.txt"
    )

    async def main() -> None:
        async with fake_agent(tmp_path, mode="approve", permissions=decide) as upstream:
            session = await upstream.new_session()
            events, end = await run_turn(upstream, session.id, script.prompt())
            [request] = asked
            assert (request.session_id, request.tool_name, request.arguments) == (
                session.id,
                "developer__shell",
                {"command": "ls"},
            )
            assert request.kinds == ["allow_always", "allow_once", "reject_once", "reject_always"]
            response = contents(events)[-1]["toolResult"]["value"]
            assert response == {"content": [{"type": "text", "text": "a.txt"}], "isError": False}
            assert end.event.data["reason"] == "end_turn"

    asyncio.run(main())


def test_without_a_callback_every_permission_request_is_rejected(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway_kit.upstream.acp.stderr")
    script = AcpScript().tool("developer__shell", {"command": "rm -rf /"}, permission=True)

    async def main() -> None:
        async with fake_agent(tmp_path, mode="approve") as upstream:
            session = await upstream.new_session()
            events, end = await run_turn(upstream, session.id, script.prompt())
            response = contents(events)[-1]["toolResult"]["value"]
            assert response == {"content": [{"type": "text", "text": DECLINED}], "isError": True}
            assert end.event.data["reason"] == "end_turn"
            await until(lambda: "selected reject_once" in caplog.text)

    asyncio.run(main())


def test_the_mode_decides_whether_the_agent_asks(tmp_path: Path) -> None:
    asked: list[PermissionRequest] = []

    async def decide(request: PermissionRequest) -> str:
        asked.append(request)
        return "reject_once"

    script = AcpScript().tool("developer__shell", {"command": "ls"}, permission=True, result="a")

    async def main() -> None:
        # goose's default mode runs tools without asking: no mode set, no request.
        async with fake_agent(tmp_path, permissions=decide) as upstream:
            session = await upstream.new_session()
            events, _ = await run_turn(upstream, session.id, script.prompt())
            assert asked == []
            assert contents(events)[-1]["toolResult"]["value"]["isError"] is False
            assert session.data["modes"]["currentModeId"] == "auto"

    asyncio.run(main())


def test_a_second_prompt_while_one_runs_is_refused_as_busy(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            events: list[Any] = []
            first = AcpTurn(upstream, session.id, emit=events.append)
            running = asyncio.create_task(first.run(AcpScript().text("working").hang().prompt()))
            await until(lambda: events)
            second: list[Any] = []
            with pytest.raises(AcpSessionBusy):
                await AcpTurn(upstream, session.id, emit=second.append).run("me too")
            assert second == []  # a refused run writes nothing
            await first.cancel()
            end = await asyncio.wait_for(running, 30)
            assert end.event.data["reason"] == "cancelled"

    asyncio.run(main())


def test_a_session_the_agent_does_not_know_is_not_found(tmp_path: Path) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            with pytest.raises(AcpSessionNotFound, match="Session not found: 20200101_1"):
                await upstream.prompt("20200101_1", "hello")

    asyncio.run(main())
