"""End to end over a real uvicorn process on a loopback port, on every log backend.

What a client that stops reading leaves in the server is read from the kernel's table of the
server's TCP sockets (/proc/net/tcp), on uvicorn's two HTTP implementations and two loops.
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from gateway_kit import EventLog
from tests.support.waiting import until

from .live_server import LiveServer, serve
from .raw_client import (
    complete_frame_ids,
    open_frozen,
    open_stream,
    read_to_close,
    read_to_response_end,
)

PATH = "/gateway/streams/conv/events"
READ_TIMEOUT = 15.0
RELEASE_TIMEOUT = 15.0  # seconds for the server to let go of a client it cut off
# What the server logs (uvicorn_process.py shows the gateway's stream messages).
CANNOT_KEEP_UP = "closing a stream whose client cannot keep up"
RESETTING = "resetting the connection of a client that stopped reading"


def append(log: EventLog, count: int, size: int = 10) -> int:
    events = log.append_many(
        [{"stream": "conv", "type": "Message", "data": {"pad": "x" * size}} for _ in range(count)]
    )
    return events[-1].seq


def test_httpx_sse_resumes_with_last_event_id_after_a_dropped_connection(
    log: EventLog, log_url: str, tmp_path: Path
) -> None:
    append(log, 5)

    async def main(url: str) -> list[int]:
        seen: list[int] = []
        async with httpx.AsyncClient(base_url=url, timeout=READ_TIMEOUT) as client:
            async with aconnect_sse(client, "GET", PATH) as source:
                async for sse in source.aiter_sse():
                    assert sse.event == "message"  # no event: line, so onmessage sees it
                    seen.append(json.loads(sse.data)["seq"])
                    if len(seen) == 3:
                        break  # the connection drops here
            await log.aappend_many([{"stream": "conv", "type": "Message"} for _ in range(4)])
            headers = {"Last-Event-ID": str(seen[-1])}
            async with aconnect_sse(client, "GET", PATH, headers=headers) as source:
                async for sse in source.aiter_sse():
                    assert int(sse.id) == json.loads(sse.data)["seq"]
                    seen.append(int(sse.id))
                    if len(seen) == 9:
                        break
        return seen

    with serve(log_url, tmp_path) as server:
        assert asyncio.run(main(server.url)) == list(range(1, 10))


def test_500_subscribers_get_every_event_and_a_frozen_one_is_cut_off(
    log: EventLog, log_url: str, tmp_path: Path
) -> None:
    append(log, 1)
    batches, batch = 6, 32

    async def main(server: LiveServer) -> None:
        server_host, port = server.host, server.port
        clients = await asyncio.gather(*(open_stream(server_host, port, PATH) for _ in range(500)))
        frozen = await asyncio.to_thread(open_frozen, server_host, port, PATH)
        with frozen:
            frozen_port = frozen.getsockname()[1]
            assert server.connection_to(frozen_port) is not None
            await asyncio.gather(*(c.read_until(1) for c in clients))
            for _ in range(batches):
                last = append(log, batch, size=1000)
                await asyncio.wait_for(
                    asyncio.gather(*(c.read_until(last) for c in clients)), READ_TIMEOUT
                )
            # Everyone else got everything while the frozen client had read nothing at all.
            assert all(c.ids == list(range(1, last + 1)) for c in clients)
            for c in clients:
                c.close()

            # Its queue filled: it was cut off, and its connection closed while it read nothing.
            await connection_released(server, frozen_port)
            received, reset = await asyncio.to_thread(read_to_close, frozen, READ_TIMEOUT)
        assert reset  # what the server had not sent yet was dropped, not sent before a close
        frozen_ids = complete_frame_ids(received)
        assert frozen_ids == list(range(1, len(frozen_ids) + 1))
        assert len(frozen_ids) < last

        resumed = await open_stream(
            server_host, port, PATH + f"?after={frozen_ids[-1] if frozen_ids else 0}"
        )
        await asyncio.wait_for(resumed.read_until(last), READ_TIMEOUT)
        assert frozen_ids + resumed.ids == list(range(1, last + 1))
        resumed.close()

    # A small kernel send buffer: what the kernel holds for the frozen client fills quickly.
    settings = {"streams": {"queue_size": 16}, "http": {"send_timeout": 120}}
    with serve(log_url, tmp_path, sndbuf=4096, settings=settings) as server:
        asyncio.run(main(server))


async def connection_released(server: LiveServer, client_port: int) -> None:
    """Wait until the server's socket for `client_port` is gone or closed; fail at a deadline."""

    def released() -> bool:
        held = server.connection_to(client_port)
        return held is None or not held.open

    def still_held() -> str:
        held = server.connection_to(client_port)
        return (
            f"{RELEASE_TIMEOUT:g} s on, the server still holds the connection of the client it "
            f"cut off: {held}"
        )

    await until(released, RELEASE_TIMEOUT, interval=0.01, failure=still_held)


async def logged(server: LiveServer, text: str) -> None:
    def unlogged() -> str:
        return f"the server did not log {text!r}"

    await until(lambda: text in server.output(), READ_TIMEOUT, interval=0.01, failure=unlogged)


async def kernel_full(server: LiveServer, client_port: int) -> None:
    """Wait until the kernel holds data the server sent to `client_port` and it has not read."""

    def full() -> bool:
        held = server.connection_to(client_port)
        return held is not None and held.unsent > 0

    def empty() -> str:
        return f"nothing written to the frozen client: {server.connection_to(client_port)}"

    await until(full, READ_TIMEOUT, interval=0.01, failure=empty)


async def frozen_behind(server: LiveServer, log: EventLog) -> tuple[socket.socket, int]:
    """A client that stopped reading, once the kernel holds data for it: its socket and port.

    128 kB are appended: more than the kernel (~10 kB here) and the server (64 KiB) hold for a
    client before the server makes the next write wait.
    """
    frozen = await asyncio.to_thread(open_frozen, server.host, server.port, PATH)
    port = frozen.getsockname()[1]
    assert server.connection_to(port) is not None
    append(log, 128, size=1000)
    await kernel_full(server, port)
    return frozen, port


# uvicorn's (http, loop): the default (both installed), and each with the other's alternative.
STACKS = [("httptools", "uvloop"), ("h11", "asyncio"), ("h11", "uvloop"), ("httptools", "asyncio")]
# Gateway options under which a client that stops reading is cut off for one reason only.
CUT_OFFS: dict[str, dict[str, Any]] = {
    # Its queue of 16 overflows; the send timeout is far beyond the test.
    "overflow": {"settings": {"streams": {"queue_size": 16}, "http": {"send_timeout": 120}}},
    # The default queue (1 024) holds every event of the test; a write waits more than 1 s.
    "send_timeout": {"settings": {"http": {"send_timeout": 1.0}}},
}


@pytest.mark.parametrize("cause", CUT_OFFS)
@pytest.mark.parametrize(("http", "loop"), STACKS, ids=["-".join(s) for s in STACKS])
def test_a_client_that_stops_reading_loses_its_connection(
    sqlite_url: str, tmp_path: Path, http: str, loop: str, cause: str
) -> None:
    # SQLite only: the backend only feeds the fan-out, and neither the cut-off nor the reset
    # touches the log. The 500-subscriber test above covers the overflow on every backend.
    log = EventLog(sqlite_url)

    async def main(server: LiveServer) -> None:
        frozen, port = await frozen_behind(server, log)
        with frozen:
            last = append(log, 64, size=1000)  # a write that has to wait, or a queue overflows
            await connection_released(server, port)
            received, reset = await asyncio.to_thread(read_to_close, frozen, READ_TIMEOUT)
        assert reset
        ids = complete_frame_ids(received)
        assert ids == list(range(1, len(ids) + 1))
        assert len(ids) < last

    try:
        options = CUT_OFFS[cause]
        with serve(sqlite_url, tmp_path, sndbuf=4096, http=http, loop=loop, **options) as server:
            asyncio.run(main(server))
            output = server.output()
        assert RESETTING in output
        assert (CANNOT_KEEP_UP in output) == (cause == "overflow")
        # The server took the reset for a client gone, not for an application error.
        assert "ERROR" not in output, output
    finally:
        log.close()


@pytest.mark.parametrize(("http", "loop"), STACKS[:2], ids=["-".join(s) for s in STACKS[:2]])
def test_a_client_cut_off_that_reads_again_gets_a_clean_end(
    sqlite_url: str, tmp_path: Path, http: str, loop: str
) -> None:
    # Only too slow, not stuck: it takes the end of the response within the second it is given.
    log = EventLog(sqlite_url)

    async def main(server: LiveServer) -> None:
        frozen, _ = await frozen_behind(server, log)
        with frozen:
            last = append(log, 64, size=1000)  # its queue of 16 overflows
            await logged(server, CANNOT_KEEP_UP)
            received = await asyncio.to_thread(read_to_response_end, frozen, READ_TIMEOUT)
        ids = complete_frame_ids(received)
        assert ids == list(range(1, len(ids) + 1))
        assert len(ids) < last

    try:
        settings = {"streams": {"queue_size": 16}, "http": {"send_timeout": 120}}
        with serve(
            sqlite_url, tmp_path, sndbuf=4096, http=http, loop=loop, settings=settings
        ) as server:
            asyncio.run(main(server))
            output = server.output()
        assert RESETTING not in output
        assert "ERROR" not in output, output
    finally:
        log.close()


def test_sigterm_closes_open_streams_and_the_server_exits(
    log: EventLog, log_url: str, tmp_path: Path
) -> None:
    append(log, 1)

    async def main(server_host: str, port: int, stop: asyncio.Future[None]) -> None:
        streams = await asyncio.gather(*(open_stream(server_host, port, PATH) for _ in range(3)))
        await asyncio.gather(*(s.read_until(1) for s in streams))
        stop.set_result(None)
        await asyncio.wait_for(asyncio.gather(*(s.read_to_end() for s in streams)), READ_TIMEOUT)
        for s in streams:
            s.close()
        assert all(s.ended for s in streams)  # a clean end of the response, not a reset

    with serve(log_url, tmp_path) as server:

        async def run() -> None:
            stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            stop.add_done_callback(lambda _: server.process.send_signal(signal.SIGTERM))
            await main(server.host, server.port, stop)

        asyncio.run(run())
        # uvicorn waits for open connections before it exits: no stream held it back.
        assert server.process.wait(READ_TIMEOUT) in (0, -signal.SIGTERM)
        assert "Application shutdown complete" in server.output()


def test_sigterm_with_a_client_that_stopped_reading_still_exits(
    sqlite_url: str, tmp_path: Path
) -> None:
    # Neither cut off before the signal (big queue, long send timeout) nor able to take the end
    # of its response: only a reset lets uvicorn's wait for open connections end.
    log = EventLog(sqlite_url)

    async def main(server: LiveServer) -> None:
        healthy = await open_stream(server.host, server.port, PATH)
        frozen, port = await frozen_behind(server, log)
        with frozen:
            last = append(log, 64, size=1000)
            await asyncio.wait_for(healthy.read_until(last), READ_TIMEOUT)
            server.process.send_signal(signal.SIGTERM)
            await asyncio.wait_for(healthy.read_to_end(), READ_TIMEOUT)
            healthy.close()
            await connection_released(server, port)
        assert healthy.ended  # a client that reads still gets the clean end

    try:
        settings = {"http": {"send_timeout": 120}}
        with serve(sqlite_url, tmp_path, sndbuf=4096, settings=settings) as server:
            asyncio.run(main(server))
            assert server.process.wait(READ_TIMEOUT) in (0, -signal.SIGTERM)
            assert "Application shutdown complete" in server.output()
    finally:
        log.close()


def test_the_legacy_app_is_served_through_the_gateway(
    log: EventLog, log_url: str, tmp_path: Path
) -> None:
    log.append("conv", "Message", {"text": "hi"}, run_id="task-1")
    with serve(log_url, tmp_path) as server, httpx.Client(base_url=server.url) as client:
        assert client.get("/hello").json() == {"hello": "from flask"}
        assert client.get("/api/tasks/other").json()["served_by"] == "flask"
        task = client.get("/api/tasks/task-1", params={"from": 0}).json()
        assert [e["data"] for e in task["events"]] == [{"text": "hi"}]
        assert task["next_offset"] == 1
