"""The observer inside a Gateway, in front of a Flask app, through a real uvicorn: what a
scheduler asking ``GET /gateway/heartbeat/{tmux}`` hears while agents talk to the app, and
that only the agent's own traffic (its holder's credential) is heard."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from gateway_kit import EventLog, Gateway, GatewaySettings
from gateway_kit.bindings.claims import claims_of
from gateway_kit.execution.settings import ExecutionSettings
from gateway_kit.execution.tables import requests
from gateway_kit.identity.tokens import ApiTokens
from tests.support.serving import serve_in_thread
from tests.support.waiting import until

from .agent_api import Pace, agent_api

TMUX = "agent-7"
WAIT = 20.0


@pytest.fixture
def pace() -> Iterator[Pace]:
    pace = Pace()
    yield pace
    pace.release()  # a stream a test left waiting ends


@pytest.fixture
def alice(log: EventLog) -> dict[str, str]:
    """The headers of alice's agent, who holds the tmux session: her token and its id."""
    claims_of(log).claim(TMUX, "alice")
    token = ApiTokens(log).create("alice")[1]
    return {"authorization": f"Bearer {token}", "X-Tmux-Session-Id": TMUX}


def serve(log: EventLog, pace: Pace, **settings: Any) -> Any:
    gateway = Gateway(
        agent_api(pace),
        log=log,
        load_entry_points=False,
        # No pane to read here: the traffic decides alone.
        block_plugins=("tmux_pane",),
        settings=GatewaySettings(execution=ExecutionSettings(**settings)),
    )
    return serve_in_thread(gateway)


def scheduler(base: str, agent: dict[str, str]) -> httpx.AsyncClient:
    """A client of the session's holder that asks for heartbeat decisions."""
    auth = {"authorization": agent["authorization"]}
    return httpx.AsyncClient(base_url=base, timeout=WAIT, headers=auth)


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


def test_a_stream_outliving_its_view_is_open_to_its_last_byte(
    log: EventLog, pace: Pace, alice: dict[str, str]
) -> None:
    async def scenario(base: str) -> None:
        async with scheduler(base, alice) as client:
            body = {"stream": True, "finish_reason": "stop"}
            async with client.stream("POST", "/v1/chat/completions", json=body, headers=alice) as r:
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


def test_a_client_that_leaves_mid_stream_makes_the_session_stale(
    log: EventLog, pace: Pace, alice: dict[str, str]
) -> None:
    async def scenario(base: str) -> None:
        async with scheduler(base, alice) as client:
            agent = httpx.AsyncClient(base_url=base, timeout=WAIT)
            body = {"stream": True}
            async with agent.stream("POST", "/v1/chat/completions", json=body, headers=alice) as r:
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


def test_tool_calls_give_a_grace_and_then_no_heartbeat_on_the_traffic_alone(
    log: EventLog, pace: Pace, alice: dict[str, str]
) -> None:
    async def scenario(base: str) -> None:
        async with scheduler(base, alice) as client:
            body = {"stream": False, "finish_reason": "tool_calls"}
            answer = await client.post("/v1/chat/completions", json=body, headers=alice)
            assert answer.json()["choices"][0]["finish_reason"] == "tool_calls"
            # The answer is whole, and the request ended before its last bytes left.
            grace = await heartbeat(client)
            assert (grace["state"], grace["decision"], grace["reason"]) == (
                "POST_RESPONSE_GRACE", "skip", "post_response_grace",
            )  # fmt: skip
            # The agent may now be running the tool, or showing its permission prompt.
            idle = await state_becomes(client, "IDLE")
            assert (idle["decision"], idle["reason"]) == ("skip", "ending_unconfirmed")
            listed = await client.get(f"/gateway/heartbeat/{TMUX}/decisions")
            reasons = [d["reason"] for d in listed.json()["decisions"]]
            assert reasons[0] == "ending_unconfirmed" and reasons[-1] == "post_response_grace"

    with serve(log, pace, grace=3.0) as base:
        asyncio.run(scenario(base))


def test_requests_of_no_tmux_session_leave_it_unknown(
    log: EventLog, pace: Pace, alice: dict[str, str]
) -> None:
    async def scenario(base: str) -> None:
        async with scheduler(base, alice) as client:
            assert (await client.get("/status")).json() == {"ok": True}
            unknown = await heartbeat(client)
            assert (unknown["state"], unknown["decision"], unknown["reason"]) == (
                "UNKNOWN", "skip", "no_evidence",
            )  # fmt: skip

    with serve(log, pace) as base:
        asyncio.run(scenario(base))


def test_requests_not_from_the_holder_never_change_the_sessions_state(
    log: EventLog, pace: Pace, alice: dict[str, str]
) -> None:
    bob = ApiTokens(log).create("bob")[1]
    naming = [
        {"X-Tmux-Session-Id": TMUX},  # unauthenticated, naming the session
        {"X-Tmux-Session-Id": TMUX, "authorization": f"Bearer {bob}"},  # another user
    ]

    async def scenario(base: str) -> None:
        async with scheduler(base, alice) as client:
            body = {"stream": False, "finish_reason": "stop"}
            for headers in naming:
                async with httpx.AsyncClient(base_url=base, headers=headers) as someone:
                    assert (await someone.get("/status")).status_code == 200
                    answer = await someone.post("/v1/chat/completions", json=body)
                    assert answer.status_code == 200
            # Nothing they sent was heard: the session is as unknown as before them.
            unknown = await heartbeat(client)
            assert (unknown["state"], unknown["reason"]) == ("UNKNOWN", "no_evidence")
            assert unknown["evidence"]["last_request_id"] is None
            # The holder's own request is.
            await client.post("/v1/chat/completions", json=body, headers=alice)
            idle = await state_becomes(client, "IDLE")
            assert (idle["decision"], idle["reason"]) == ("allow", "response_stop")

    with serve(log, pace) as base:
        asyncio.run(scenario(base))


def test_a_body_that_never_ends_from_someone_else_holds_nothing(
    log: EventLog, pace: Pace, alice: dict[str, str]
) -> None:
    async def scenario(base: str) -> None:
        async with scheduler(base, alice) as client:
            await client.post("/v1/chat/completions", json={"finish_reason": "stop"}, headers=alice)
            idle = await state_becomes(client, "IDLE")
            assert idle["decision"] == "allow"
            host, port = base.removeprefix("http://").split(":")
            _, writer = await asyncio.open_connection(host, int(port))
            try:
                # An unauthenticated POST naming the session, whose body never comes.
                writer.write(
                    b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                    + f"X-Tmux-Session-Id: {TMUX}\r\n".encode()
                    + b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
                )
                await writer.drain()
                # The app is reading its body; the session is still idle, the decision allow.
                for _ in range(3):
                    still = await heartbeat(client)
                    assert (still["state"], still["decision"]) == ("IDLE", "allow"), still
                    assert still["evidence"]["waiting_count"] == 0
            finally:
                writer.close()

    with serve(log, pace) as base:
        asyncio.run(scenario(base))


def test_requests_naming_sessions_nobody_holds_add_no_rows(log: EventLog, pace: Pace) -> None:
    async def scenario(base: str) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=WAIT) as client:
            for n in range(50):
                headers = {"X-Tmux-Session-Id": f"probe-{n}"}
                assert (await client.get("/status", headers=headers)).status_code == 200

    with serve(log, pace) as base:
        asyncio.run(scenario(base))
    # The server has stopped: whatever its recorder had to write is written.
    with log.tables.engine.connect() as conn:
        written = conn.execute(sa.select(sa.func.count()).select_from(requests)).scalar_one()
    assert written == 0
