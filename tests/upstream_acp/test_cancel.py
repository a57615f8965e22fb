"""Cancelling a turn: it ends `cancelled` within the deadline, whatever the agent does."""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from gateway_kit.testing.fake_acp_agent import AcpScript
from gateway_kit.upstream.acp import (
    AcpSessionBusy,
    AcpTurn,
    AcpUpstream,
    PermissionRequest,
    TurnEnd,
)
from tests.support.waiting import until
from tests.upstream_acp.agents import TURN_TIMEOUT, fake_agent, texts


async def started(
    upstream: AcpUpstream, session_id: str, script: AcpScript
) -> tuple[AcpTurn, list[Any], asyncio.Task[TurnEnd]]:
    """A turn running `script`, once its first event came."""
    events: list[Any] = []
    turn = AcpTurn(upstream, session_id, emit=events.append)
    running = asyncio.create_task(turn.run(script.prompt()))
    await until(lambda: events or running.done())
    return turn, events, running


@pytest.mark.parametrize(
    ("script", "reported"),
    [
        (AcpScript().text("working").hang(), "cancelled"),
        # goose up to 1.48 answers a cancelled turn end_turn: still a cancelled run.
        (AcpScript().end_turn_on_cancel().text("working").hang(), "end_turn"),
    ],
    ids=["cancelled", "end_turn"],
)
def test_a_cancelled_turn_finishes_cancelled(
    tmp_path: Path, script: AcpScript, reported: str
) -> None:
    async def main() -> None:
        async with fake_agent(tmp_path) as upstream:
            session = await upstream.new_session()
            turn, events, running = await started(upstream, session.id, script)
            assert await turn.cancel() is True
            end = await asyncio.wait_for(running, TURN_TIMEOUT)
            assert [e.type for e in events] == ["Message", "Finish"]
            assert end.event.data["reason"] == "cancelled"
            assert end.event.data["acp"]["stopReason"] == reported
            assert end.result is not None and end.result.cancel_requested
            # The session takes the next prompt.
            nxt: list[Any] = []
            again = await AcpTurn(upstream, session.id, emit=nxt.append).run("next")
            assert again.event.data["reason"] == "end_turn"

    asyncio.run(main())


def test_an_agent_that_ignores_the_cancel_still_ends_the_turn_by_the_deadline(
    tmp_path: Path,
) -> None:
    deadline = 0.5

    async def main() -> None:
        async with fake_agent(tmp_path, cancel_deadline=deadline) as upstream:
            session = await upstream.new_session()
            turn, _, running = await started(
                upstream, session.id, AcpScript().text("x").ignore_cancel()
            )
            asked = time.monotonic()
            await turn.cancel()
            end = await asyncio.wait_for(running, TURN_TIMEOUT)
            took = time.monotonic() - asked
            assert end.event.data["reason"] == "cancelled"
            assert end.event.data["acp"] == {"stopReason": None}  # the agent never answered
            assert deadline <= took < deadline + 5
            # The agent still runs that turn: it says so, and that is busy, as goose's is.
            with pytest.raises(AcpSessionBusy, match="active run"):
                await upstream.prompt(session.id, "next")

    asyncio.run(main())


def test_a_cancel_answers_the_pending_permission_request_cancelled(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="gateway_kit.upstream.acp.stderr")
    asked: list[PermissionRequest] = []

    async def undecided(request: PermissionRequest) -> str:
        asked.append(request)
        await asyncio.Event().wait()  # nobody decides
        return "allow_once"

    script = (
        AcpScript().text("about to").tool("developer__shell", {"command": "ls"}, permission=True)
    )

    async def main() -> None:
        async with fake_agent(tmp_path, mode="approve", permissions=undecided) as upstream:
            session = await upstream.new_session()
            turn, events, running = await started(upstream, session.id, script)
            await until(lambda: upstream.pending_permissions(session.id))
            await turn.cancel()
            end = await asyncio.wait_for(running, TURN_TIMEOUT)
            assert end.event.data["reason"] == "cancelled"
            assert asked[0].withdrawn == "the turn was cancelled"
            assert upstream.pending_permissions() == []
            assert texts(events) == ["about to"]
            # The agent was answered `cancelled`, and the tool did not run.
            await until(lambda: "permission" in caplog.text)
            assert f"permission {asked[0].tool_call_id}: cancelled" in caplog.text
            assert not any(e.type == "Message" and "toolResponse" in str(e.data) for e in events)

    asyncio.run(main())
