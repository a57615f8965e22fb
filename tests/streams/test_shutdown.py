"""Streams end when the server stops, so that it can stop (uvicorn waits for open responses)."""

from __future__ import annotations

import asyncio
import socket
import threading

import httpx
import uvicorn

from gateway_kit import EventLog, Gateway
from gateway_kit.types import Message
from tests.support.asgi_driver import Request

PATH = "/gateway/streams/conv/events"
TIMEOUT = 15.0


def test_a_server_stopping_in_a_thread_closes_open_streams(log: EventLog, gateway: Gateway) -> None:
    # No signal handler to look at here: the connection itself shows the server stopping.
    log.append("conv", "Message", {})
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(gateway, log_level="warning", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:
        while not server.started:
            thread.join(0.01)
        host, port = sock.getsockname()
        with (
            httpx.Client(base_url=f"http://{host}:{port}", timeout=TIMEOUT) as client,
            client.stream("GET", PATH) as response,
        ):
            lines = response.iter_lines()
            assert next(lines) == "id: 1"
            server.should_exit = True
            rest = list(lines)  # ends: the server finished the response
        assert all(line.startswith("data:") or not line for line in rest)
        thread.join(TIMEOUT)
        assert not thread.is_alive()
    finally:
        server.should_exit = True
        thread.join(TIMEOUT)
        sock.close()


def test_lifespan_shutdown_closes_streams_and_the_next_startup_reopens(gateway: Gateway) -> None:
    async def main() -> None:
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        outbox: list[str] = []

        async def send(message: Message) -> None:
            outbox.append(message["type"])

        lifespan = asyncio.ensure_future(
            gateway({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
        )
        await inbox.put({"type": "lifespan.startup"})
        stream = Request(gateway, PATH).start()
        await stream.wait_for(lambda r: r.status == 200)
        await inbox.put({"type": "lifespan.shutdown"})
        await stream.finished()
        await asyncio.wait_for(lifespan, TIMEOUT)
        assert stream.complete
        assert outbox == ["lifespan.startup.complete", "lifespan.shutdown.complete"]

        refused = await Request(gateway, PATH).run()
        assert refused.status == 503
        restart = asyncio.ensure_future(
            gateway({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send)
        )
        await inbox.put({"type": "lifespan.startup"})
        reopened = Request(gateway, PATH).start()
        await reopened.wait_for(lambda r: r.status == 200)
        reopened.disconnect()
        await reopened.finished()
        await inbox.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(restart, TIMEOUT)

    asyncio.run(main())
