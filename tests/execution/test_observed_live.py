"""The observer inside a Gateway, in front of a Flask app, through a real uvicorn: what a
scheduler asking ``GET /gateway/heartbeat/{tmux}`` hears while agents talk to the app."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.execution.settings import ExecutionSettings

from ..serving import serve_in_thread
from ..waiting import until
from .agent_api import Pace, agent_api

TMUX = "agent-7"
AGENT = {"X-Tmux-Session-Id": TMUX}
WAIT = 20.0


@pytest.fixture
def pace() -> Iterator[Pace]:
    pace = Pace()
    yield pace
    pace.release()  # a stream a test left waiting ends


def serve(log: EventLog, pace: Pace, **settings: Any) -> Any:
    gateway = Gateway(
        agent_api(pace),
        log=log,
        allow_anonymous=True,
        load_entry_points=False,
        execution_settings=ExecutionSettings(**settings),
    )
    return serve_in_thread(gateway)


async def heartbeat(client: httpx.AsyncClient) -> dict[str, Any]:
    answer = await client.get(f"/gateway/heartbeat/{TMUX}")
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


async def state_becomes(client: httpx.AsyncClient, state: str) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def reached() -> bool:
        seen.update(await heartbeat(client))
        return seen["state"] == state

    await until(reached, WAIT, failure=lambda: f"still {seen.get('state')}: {seen}")
    return seen


def test_a_stream_outliving_its_view_is_open_to_its_last_byte(log: EventLog, pace: Pace) -> None:
    async def scenario(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
            body = {"stream": True, "finish_reason": "stop"}
            async with client.stream("POST", "/v1/chat/completions", json=body, headers=AGENT) as r:
                lines = r.aiter_lines()
                assert (await anext(lines)).startswith("data: ")
                # The view's finally ran; the stream is not over.
                assert await asyncio.to_thread(pace.view_returned.wait, WAIT)
                during = await heartbeat(client)
                assert (during["state"], during["decision"], during["reason"]) == (
                    "STREAMING_OPEN", "skip", "sse_open",
                )  # fmt: skip
                assert during["evidence"]["open_sse_count"] == 1
                pace.release()
                rest = [line async for line in lines]
            assert "data: [DONE]" in rest
            after = await state_becomes(client, "IDLE")
            assert (after["decision"], after["reason"]) == ("allow", "response_stop")
            assert after["evidence"]["last_finish_reason"] == "stop"

    with serve(log, pace) as base:
        asyncio.run(scenario(base))


def test_a_client_that_leaves_mid_stream_makes_the_session_stale(log: EventLog, pace: Pace) -> None:
    async def scenario(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
            agent = httpx.AsyncClient(base_url=base, timeout=WAIT)
            body = {"stream": True}
            async with agent.stream("POST", "/v1/chat/completions", json=body, headers=AGENT) as r:
                lines = r.aiter_lines()  # held: a dropped iterator would close the response
                await anext(lines)
                during = await heartbeat(client)
                assert during["state"] == "STREAMING_OPEN", during
            await agent.aclose()  # the agent is gone, its stream unfinished
            stale = await state_becomes(client, "STALED")
            assert (stale["decision"], stale["reason"]) == ("allow", "client_closed")
            assert stale["evidence"]["last_client_close_before_terminal"] is True
            assert not pace.finished.is_set()
            pace.release()  # the app's thread, writing into the void, may now end

    with serve(log, pace) as base:
        asyncio.run(scenario(base))


def test_tool_calls_give_a_grace_then_idle(log: EventLog, pace: Pace) -> None:
    async def scenario(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
            body = {"stream": False, "finish_reason": "tool_calls"}
            answer = await client.post("/v1/chat/completions", json=body, headers=AGENT)
            assert answer.json()["choices"][0]["finish_reason"] == "tool_calls"
            # The answer is whole, and the request ended before its last bytes left.
            grace = await heartbeat(client)
            assert (grace["state"], grace["decision"], grace["reason"]) == (
                "POST_RESPONSE_GRACE", "skip", "post_response_grace",
            )  # fmt: skip
            idle = await state_becomes(client, "IDLE")
            assert (idle["decision"], idle["reason"]) == ("allow", "grace_over")
            listed = await client.get(f"/gateway/heartbeat/{TMUX}/decisions")
            reasons = [d["reason"] for d in listed.json()["decisions"]]
            assert reasons[0] == "grace_over" and reasons[-1] == "post_response_grace"

    with serve(log, pace, grace=3.0) as base:
        asyncio.run(scenario(base))


def test_requests_of_no_tmux_session_leave_it_unknown(log: EventLog, pace: Pace) -> None:
    async def scenario(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
            assert (await client.get("/status")).json() == {"ok": True}
            unknown = await heartbeat(client)
            assert (unknown["state"], unknown["decision"], unknown["reason"]) == (
                "UNKNOWN", "skip", "no_evidence",
            )  # fmt: skip

    with serve(log, pace) as base:
        asyncio.run(scenario(base))
