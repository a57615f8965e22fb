"""An ACP agent's permission requests are the approvals goose's tool confirmations are: listed
and decided through the same routes, the agent told by the option of the decision's kind."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

from gateway_kit.testing import AcpScript
from tests.support.agents import gateway_over
from tests.support.approvals import decide, in_loop, listed, pending_approval
from tests.support.runs import sse_events, start_run, wait_status
from tests.support.waiting import until

TOOL = "developer__shell"
ARGUMENTS = {"command": "rm -rf build/"}
DECIDERS = 20


def asking(result: str = "removed") -> str:
    return (
        AcpScript()
        .tool(TOOL, ARGUMENTS, permission=True, result=result, tool_call_id="call_1")
        .text("done")
        .prompt()
    )


def tool_responses(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        item.get("toolResult", item)
        for e in events
        if e["type"] == "Message"
        for item in e["data"]["message"]["content"]
        if item["type"] == "toolResponse"
    ]


async def run_events(agent: Any, run_id: str) -> list[dict[str, Any]]:
    return sse_events((await agent.client.get(f"/gateway/runs/{run_id}/events")).text)


@in_loop
async def test_an_approved_permission_runs_the_tool(log_url: str, tmp_path: Path) -> None:
    async with gateway_over("acp", log_url, tmp_path, mode="approve") as agent:
        run_id = await start_run(agent.client, asking())
        approval = await pending_approval(agent.client)
        assert (approval["tool_name"], approval["arguments"]) == (TOOL, ARGUMENTS)
        assert approval["run_id"] == run_id
        assert (await decide(agent.client, approval, "approve")).status_code == 200
        await wait_status(agent.client, run_id, "finished")
        responses = tool_responses(await run_events(agent, run_id))
        assert len(responses) == 1 and not responses[0].get("isError"), responses
        assert "removed" in str(responses[0])
        [row] = await listed(agent.client)
        assert row["status"] == "approved"
        assert row["delivered_at"] is not None  # the tool's end proved the answer arrived


@in_loop
async def test_a_rejected_permission_does_not_run_the_tool(log_url: str, tmp_path: Path) -> None:
    async with gateway_over("acp", log_url, tmp_path, mode="approve") as agent:
        run_id = await start_run(agent.client, asking())
        approval = await pending_approval(agent.client)
        assert (await decide(agent.client, approval, "reject")).status_code == 200
        await wait_status(agent.client, run_id, "finished")
        responses = tool_responses(await run_events(agent, run_id))
        assert len(responses) == 1 and "removed" not in str(responses[0])
        [row] = await listed(agent.client)
        assert row["status"] == "rejected"


@in_loop
async def test_an_expired_permission_is_rejected(log_url: str, tmp_path: Path) -> None:
    async with gateway_over("acp", log_url, tmp_path, mode="approve", approval_expiry=0.5) as agent:
        run_id = await start_run(agent.client, asking())
        await wait_status(agent.client, run_id, "finished")
        responses = tool_responses(await run_events(agent, run_id))
        assert len(responses) == 1 and "removed" not in str(responses[0])
        [row] = await listed(agent.client)
        assert row["status"] == "expired"


@in_loop
async def test_a_permission_whose_agent_died_is_voided(log_url: str, tmp_path: Path) -> None:
    async with gateway_over("acp", log_url, tmp_path, mode="approve") as agent:
        run_id = await start_run(agent.client, asking())
        approval = await pending_approval(agent.client)
        upstream = agent.gateway.upstream
        pid = getattr(upstream, "pid", None)
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        await wait_status(agent.client, run_id, "failed")

        async def voided() -> bool:
            return [a["status"] for a in await listed(agent.client)] == ["voided"]

        await until(voided, 10, failure=lambda: "the approval was not voided")
        late = await decide(agent.client, approval, "approve")
        assert late.status_code in (409, 410), late.text


@in_loop
async def test_twenty_concurrent_deciders_on_two_gateways_one_wins(
    pg_url: str, tmp_path: Path
) -> None:
    # A second gateway on the same database, with an agent of its own: the approval is the
    # database's, and the gateway whose agent asked is the one that answers it.
    async with (
        gateway_over("acp", pg_url, tmp_path, mode="approve") as agent,
        gateway_over("acp", pg_url, tmp_path / "other", mode="approve") as other,
    ):
        run_id = await start_run(agent.client, asking())
        approval = await pending_approval(agent.client)
        clients = [agent.client, other.client] * (DECIDERS // 2)
        decisions = ["approve", "reject"] * (DECIDERS // 2)
        answers = await asyncio.gather(
            *(
                decide(each, approval, decision, reason=f"decider {n}")
                for n, (each, decision) in enumerate(zip(clients, decisions, strict=True))
            )
        )
        await wait_status(agent.client, run_id, "finished")
        taken = [a for a in answers if a.status_code == 200]
        assert len(taken) == 1
        assert all(a.status_code == 409 for a in answers if a not in taken)
        won = decisions[answers.index(taken[0])]
        responses = tool_responses(await run_events(agent, run_id))
        assert ("removed" in str(responses)) == (won == "approve")
