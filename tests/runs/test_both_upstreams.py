"""The same runs over both upstream adapters (goosed's, and an ACP agent process over stdio):
what a client sees does not depend on which agent is behind the gateway."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway_kit import AcpUpstream, GatewaySettings, LifecycleSettings
from gateway_kit.testing import AcpScript
from tests.runs.plugins import MISSING_FILE, VetoOnce
from tests.support.agents import ADAPTERS, gateway_over
from tests.support.runs import run_types, sse_events, start_run, terminal_count, wait_status


def texts(events: list[dict[str, Any]]) -> str:
    """The assistant's text of a run, its messages' chunks joined."""
    messages = [e["data"]["message"] for e in events if e["type"] == "Message"]
    return "".join(
        item["text"]
        for message in messages
        if message["role"] == "assistant"
        for item in message["content"]
        if item["type"] == "text"
    )


@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_run_streams_to_sse_and_ends_with_one_finish(
    kind: str, log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with gateway_over(kind, log_url, tmp_path) as agent:
            run_id = await start_run(agent.client, agent.says("Hel", "lo"))
            body = await wait_status(agent.client, run_id, "finished")
            assert body["status"] == "finished"
            answer = await agent.client.get(f"/gateway/runs/{run_id}/events")
            events = sse_events(answer.text)
            types = run_types(events)
            assert (types[0], types[-1], terminal_count(types)) == ("RunStarted", "Finish", 1)
            assert texts(events) == "Hello"

    asyncio.run(main())


@pytest.mark.parametrize("kind", ADAPTERS)
def test_the_legacy_task_poll_reads_the_run_to_its_one_finish(
    kind: str, log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with gateway_over(kind, log_url, tmp_path) as agent:
            run_id = await start_run(agent.client, agent.says("Hel", "lo"))
            await wait_status(agent.client, run_id, "finished")
            poll = (await agent.client.get(f"/api/tasks/{run_id}")).json()
            types = run_types(poll["events"])
            assert (poll["status"], types[-1], terminal_count(types)) == ("completed", "Finish", 1)
            assert texts(poll["events"]) == "Hello"

    asyncio.run(main())


@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_second_run_while_one_is_active_is_a_409(kind: str, log_url: str, tmp_path: Path) -> None:
    async def main() -> None:
        async with gateway_over(kind, log_url, tmp_path) as agent:
            first = await start_run(agent.client, agent.hangs())
            second = await agent.client.post("/gateway/streams/conv/runs", json={"message": "two"})
            assert (second.status_code, second.json()["error"]) == (409, "run_active")
            assert (await agent.client.post(f"/gateway/runs/{first}/cancel")).status_code == 200
            await wait_status(agent.client, first, "cancelled")
            third = await start_run(agent.client, agent.says("again"))
            await wait_status(agent.client, third, "finished")

    asyncio.run(main())


@pytest.mark.parametrize("kind", ADAPTERS)
def test_cancel_ends_the_run_as_cancelled_with_one_finish(
    kind: str, log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with gateway_over(kind, log_url, tmp_path) as agent:
            run_id = await start_run(agent.client, agent.hangs())
            cancelled = await agent.client.post(f"/gateway/runs/{run_id}/cancel")
            assert cancelled.json()["cancel_requested"] is True
            await wait_status(agent.client, run_id, "cancelled")
            events = sse_events((await agent.client.get(f"/gateway/runs/{run_id}/events")).text)
            types = run_types(events)
            assert (types[-1], terminal_count(types)) == ("Finish", 1)

    asyncio.run(main())


@pytest.mark.parametrize("kind", ADAPTERS)
def test_two_streams_at_once_do_not_mix(kind: str, log_url: str, tmp_path: Path) -> None:
    async def main() -> None:
        async with gateway_over(kind, log_url, tmp_path) as agent:
            one = await start_run(agent.client, agent.says("one ", "one"), stream="a")
            two = await start_run(agent.client, agent.says("two ", "two"), stream="b")
            for run_id in (one, two):
                await wait_status(agent.client, run_id, "finished")
            a = sse_events((await agent.client.get(f"/gateway/runs/{one}/events")).text)
            b = sse_events((await agent.client.get(f"/gateway/runs/{two}/events")).text)
            assert (texts(a), texts(b)) == ("one one", "two two")

    asyncio.run(main())


def test_an_acp_agent_killed_mid_turn_ends_the_run_and_the_next_continues_its_session(
    log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with gateway_over("acp", log_url, tmp_path) as agent:
            first = await start_run(agent.client, agent.says("remember me"))
            await wait_status(agent.client, first, "finished")
            assert agent.gateway.runs is not None
            store = agent.gateway.runs.store
            session = store.binding("conv")
            upstream = agent.gateway.upstream
            assert isinstance(upstream, AcpUpstream) and session is not None
            pid = upstream.pid
            killed = await start_run(agent.client, AcpScript().text("half an ans").crash().prompt())
            await wait_status(agent.client, killed, "failed")
            events = sse_events((await agent.client.get(f"/gateway/runs/{killed}/events")).text)
            types = run_types(events)
            assert (types[-1], terminal_count(types)) == ("Error", 1)
            assert "exited" in str(events[-1]["data"]["error"]), events[-1]
            # The agent is restarted and loads the session again: its history is replayed to
            # the gateway, which writes none of it a second time.
            after = await start_run(agent.client, agent.says("back"))
            await wait_status(agent.client, after, "finished")
            stream = await agent.log.aread(0, "conv", 1000, settled=False)
            said = [texts([{"type": e.type, "data": e.data}]) for e in stream]
            assert [t for t in said if t] == ["remember me", "half an ans", "back"]
            assert store.binding("conv") == session  # the same ACP session, loaded again
            assert upstream.pid not in (None, pid)

    asyncio.run(main())


@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_finish_guard_veto_follows_up_in_the_same_run_with_one_end(
    kind: str, log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        guard = VetoOnce()
        async with gateway_over(kind, log_url, tmp_path, plugins=[guard]) as agent:
            run_id = await start_run(agent.client, agent.says("Summary: done."))
            await wait_status(agent.client, run_id, "finished")
            events = sse_events((await agent.client.get(f"/gateway/runs/{run_id}/events")).text)
            types = run_types(events)
            assert (types[-1], terminal_count(types)) == ("Finish", 1)
            follow_up = types.index("FollowUpStarted")
            assert texts(events[:follow_up]) == "Summary: done."
            assert MISSING_FILE in texts(events[follow_up:])  # the agent was asked for it
            assert len(guard.calls) == 2

    asyncio.run(main())


def test_an_acp_agent_that_ignores_cancel_still_ends_the_run_by_the_deadline(
    log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        quick = GatewaySettings(lifecycle=LifecycleSettings(busy_wait=0.5))
        async with gateway_over("acp", log_url, tmp_path, settings=quick) as agent:
            run_id = await start_run(
                agent.client, AcpScript().text("busy").ignore_cancel().prompt()
            )
            await agent.client.post(f"/gateway/runs/{run_id}/cancel")
            await wait_status(agent.client, run_id, "cancelled")  # the deadline is 1 s
            events = sse_events((await agent.client.get(f"/gateway/runs/{run_id}/events")).text)
            assert terminal_count(run_types(events)) == 1
            assert events[-1]["data"]["reason"] == "cancelled"
            # The agent still runs the abandoned prompt and refuses another: the next run is
            # the 409 of a busy session, once the gateway has waited `busy_wait` for it.
            refused = await agent.client.post(
                "/gateway/streams/conv/runs", json={"message": agent.says("next")}
            )
            assert (refused.status_code, refused.json()["error"]) == (409, "run_active")
            assert "active run" in refused.json()["message"]

    asyncio.run(main())


def test_an_acp_run_going_on_when_the_gateway_stops_ends_with_an_error(
    log_url: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with gateway_over("acp", log_url, tmp_path) as agent:
            run_id = await start_run(agent.client, agent.hangs())
            assert agent.gateway.runs is not None
            await agent.gateway.runs.shutdown()  # as the lifespan's shutdown does
            run = agent.gateway.runs.store.get(run_id)
            assert run is not None and run.status.value == "failed"
            ended = await agent.log.aread(0, "conv", 1000, run_id=run_id, settled=False)
            assert [e.type for e in ended if e.type in ("Finish", "Error")] == ["Error"]

    asyncio.run(main())
