"""Two gateway processes on one PostgreSQL database answer a heartbeat alike, whichever served
the agent; and the open stream of a process killed mid-way ends with it."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx

from gateway_kit import EventLog
from gateway_kit.bindings.claims import claims_of
from tests.support.processes import gateway_process
from tests.support.waiting import until

MODULE = "tests.execution.observed_process"
TMUX = "agent-9"
WAIT = 30.0
# The evidence both processes fold from the same rows: everything but when each decided.
SAME = ("state", "decision", "reason", "evidence")


async def answers(*urls: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(timeout=WAIT) as client:
        got = [await client.get(f"{url}/gateway/heartbeat/{TMUX}") for url in urls]
    assert all(answer.status_code == 200 for answer in got), [a.text for a in got]
    return [answer.json() for answer in got]


async def both_say(urls: tuple[str, str], reason: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []

    async def agreed() -> bool:
        seen[:] = await answers(*urls)
        return all(answer["reason"] == reason for answer in seen)

    await until(agreed, WAIT, failure=lambda: f"not both {reason}: {seen}")
    return seen


def held_by_the_agent(pg_url: str) -> None:
    """The session is held by the user the processes serve its agent as (``anonymous``)."""
    log = EventLog(pg_url)
    try:
        claims_of(log).claim(TMUX, "anonymous")
    finally:
        log.close()


def alike(documents: list[dict[str, Any]]) -> None:
    first, second = ({k: d[k] for k in SAME} for d in documents)
    assert first == second


def test_two_processes_answer_alike(pg_url: str, tmp_path: Path) -> None:
    release = tmp_path / "release"
    args = (pg_url, str(release))
    held_by_the_agent(pg_url)
    with (
        gateway_process(MODULE, *args, tmp=tmp_path, name="a") as a,
        gateway_process(MODULE, *args, tmp=tmp_path, name="b") as b,
    ):

        async def scenario() -> None:
            urls = (a.url, b.url)
            async with httpx.AsyncClient(base_url=a.url, timeout=WAIT) as agent:
                body = {"stream": True, "finish_reason": "stop"}
                headers = {"X-Tmux-Session-Id": TMUX}
                async with agent.stream(
                    "POST", "/v1/chat/completions", json=body, headers=headers
                ) as stream:
                    lines = stream.aiter_lines()
                    await anext(lines)
                    alike(await both_say(urls, "sse_open"))
                    release.touch()
                    assert "data: [DONE]" in [line async for line in lines]
            alike(await both_say(urls, "response_stop"))

        asyncio.run(scenario())


def test_a_killed_process_leaves_no_stream_open_for_ever(pg_url: str, tmp_path: Path) -> None:
    release = tmp_path / "release"  # never created: the stream would wait
    args = (pg_url, str(release))
    held_by_the_agent(pg_url)
    with (
        gateway_process(MODULE, *args, tmp=tmp_path, name="a") as a,
        gateway_process(MODULE, *args, tmp=tmp_path, name="b") as b,
    ):

        async def scenario() -> None:
            agent = httpx.AsyncClient(base_url=a.url, timeout=WAIT)
            headers = {"X-Tmux-Session-Id": TMUX}
            request = agent.build_request(
                "POST", "/v1/chat/completions", json={"stream": True}, headers=headers
            )
            response = await agent.send(request, stream=True)
            lines = response.aiter_lines()
            await anext(lines)
            await both_say((a.url, b.url), "sse_open")
            a.proc.send_signal(signal.SIGKILL)
            a.proc.wait(WAIT)
            gone = await both_say((b.url, b.url), "process_gone")
            assert gone[0]["state"] == "STALED" and gone[0]["decision"] == "allow"
            await agent.aclose()

        asyncio.run(scenario())
