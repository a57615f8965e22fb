"""The agent reached over WebSocket, as ``goose serve`` serves it, with its secret key."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn

from gateway_kit.exceptions import UpstreamAuthError
from gateway_kit.testing.fake_acp_agent import AcpScript, FakeAcpServer
from gateway_kit.upstream.acp import AcpConnectionLost, AcpTurn, AcpUpstream, PermissionRequest
from tests.support.waiting import until
from tests.upstream_acp.agents import QUICK_RESTARTS, TURN_TIMEOUT, contents, run_turn, texts

SECRET = "s3cret-key"


@asynccontextmanager
async def serving(app: FakeAcpServer, port: int = 0) -> AsyncIterator[int]:
    """The app served by uvicorn on a loopback port (given, or free); yields the port."""
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    await until(lambda: server.started or task.done())
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, TURN_TIMEOUT)


def url(port: int) -> str:
    return f"ws://127.0.0.1:{port}/acp"


async def allow_once(request: PermissionRequest) -> str:
    return "allow_once"


def test_a_turn_over_websocket_writes_what_a_turn_over_stdio_writes() -> None:
    script = (
        AcpScript()
        .thought("hmm")
        .text("Hel", "lo")
        .tool("developer__shell", {"command": "ls"}, permission=True, result="a.txt")
        .usage(4, 2)
    )

    async def main() -> None:
        async with serving(FakeAcpServer(secret_key=SECRET)) as port:
            upstream = AcpUpstream(
                url=url(port), secret_key=SECRET, mode="approve", permissions=allow_once
            )
            try:
                assert upstream.pid is None
                session = await upstream.new_session()
                events, end = await run_turn(upstream, session.id, script.prompt())
                assert [e.type for e in events] == ["Message"] * 5 + ["Finish"]
                assert texts(events) == ["Hel", "lo"]
                request, response = contents(events)[3:5]
                assert request["toolCall"]["value"]["name"] == "developer__shell"
                assert response["toolResult"]["value"]["content"] == [
                    {"type": "text", "text": "a.txt"}
                ]
                assert end.event.data["token_state"]["totalTokens"] == 6
            finally:
                await upstream.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("key", ["wrong", None], ids=["wrong-key", "no-key"])
def test_a_refused_secret_key_is_an_auth_error(key: str | None) -> None:
    async def main() -> None:
        async with serving(FakeAcpServer(secret_key=SECRET)) as port:
            upstream = AcpUpstream(url=url(port), secret_key=key, start_timeout=5.0)
            try:
                with pytest.raises(UpstreamAuthError, match="check its secret key"):
                    await upstream.start()
            finally:
                await upstream.aclose()

    asyncio.run(main())


def test_a_server_that_goes_away_mid_turn_ends_it_and_the_next_turn_reconnects() -> None:
    app = FakeAcpServer(secret_key=SECRET)

    async def main() -> None:
        async with serving(app) as port:
            upstream = AcpUpstream(url=url(port), secret_key=SECRET, **QUICK_RESTARTS)
            session = await upstream.new_session()
            await run_turn(upstream, session.id, AcpScript().text("first").prompt())
            events: list[Any] = []
            turn = AcpTurn(upstream, session.id, emit=events.append)
            running = asyncio.create_task(turn.run(AcpScript().text("half").hang().prompt()))
            await until(lambda: events)
        try:
            end = await asyncio.wait_for(running, TURN_TIMEOUT)
            assert [e.type for e in events] == ["Message", "Error"]
            assert (
                f"the WebSocket connection to the agent at {url(port)} closed"
                in (end.event.data["error"])
            )
            assert isinstance(end.error, AcpConnectionLost)
            async with serving(app, port):
                # The same session, on a new connection: loaded again from the server's store.
                nxt, again = await run_turn(upstream, session.id, "back again")
                assert "".join(texts(nxt)) == "back again"
                assert again.event.data["reason"] == "end_turn"
        finally:
            await upstream.aclose()

    asyncio.run(main())
