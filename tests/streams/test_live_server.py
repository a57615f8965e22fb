"""End to end over a real uvicorn process on a loopback port, on every log backend."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
from pathlib import Path

import httpx
from httpx_sse import aconnect_sse

from gateway_kit import EventLog

from .live_server import serve
from .raw_client import open_frozen, open_stream

PATH = "/gateway/streams/conv/events"
READ_TIMEOUT = 15.0


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

    async def main(server_host: str, port: int) -> None:
        clients = await asyncio.gather(*(open_stream(server_host, port, PATH) for _ in range(500)))
        frozen = open_frozen(server_host, port, PATH)
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

        received = await asyncio.to_thread(read_to_eof, frozen)
        frozen_ids = [int(i) for i in re.findall(rb"^id: (\d+)$", received, re.MULTILINE)]
        assert frozen_ids == list(range(1, len(frozen_ids) + 1))
        assert len(frozen_ids) < last  # its queue filled: it was disconnected

        resumed = await open_stream(
            server_host, port, PATH + f"?after={frozen_ids[-1] if frozen_ids else 0}"
        )
        await asyncio.wait_for(resumed.read_until(last), READ_TIMEOUT)
        assert frozen_ids + resumed.ids == list(range(1, last + 1))
        resumed.close()

    # A small kernel send buffer: what the kernel holds for the frozen client fills quickly.
    with serve(log_url, tmp_path, sndbuf=4096, queue_size=16, send_timeout=120) as server:
        asyncio.run(main(server.host, server.port))


def read_to_eof(sock: socket.socket) -> bytes:
    sock.settimeout(READ_TIMEOUT)
    data = bytearray()
    with sock:
        while chunk := sock.recv(1 << 20):
            data += chunk
    return bytes(data)


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
