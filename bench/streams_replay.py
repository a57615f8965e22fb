"""Replay of 100 000 events from seq 0 over SSE to one httpx-sse client: three sources.

- peer: Starlette + sse-starlette serving a Python list (one ``ServerSentEvent`` per event);
- gateway: gateway_kit's `Gateway` serving the `EventLog` (SQLite file), a page per write;
- in memory: httpx-sse parsing the very bytes the gateway sends (its frames of the same
  events, built from the same log file), handed to httpx through a `MockTransport` in 64 KiB
  chunks, the most a socket read gives httpx: the client's own ceiling, with no server at all.

Both servers run at once, each alone in its own uvicorn process, filled once through their own
``POST /bench/fill`` route; the client runs in this process and only parses SSE (it does not
decode the JSON). Each round runs the three in a rotating order; the ratios are medians of
per-round ratios.

    .venv/bin/python bench/streams_replay.py           # about 1 minute on 2 cores
    .venv/bin/python bench/streams_replay.py --rounds 9 --events 200000
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import AsyncIterator

import httpx
from _common import STREAM, Case, print_table
from _harness import (
    Server,
    Workdir,
    add_server_options,
    apply_server_options,
    machine_load,
    server_stack,
)
from httpx_sse import aconnect_sse

from gateway_kit import EventLog
from gateway_kit.streams.sse import frames

CHUNK = 64 * 1024  # bytes per read: httpcore asks the socket for at most this much
PAGE = 1000
FILL_TIMEOUT = 300.0


async def replay(client: httpx.AsyncClient, url: str, events: int) -> float:
    """Seconds from the request to the `events`-th event; checks its id."""
    start = time.perf_counter()
    count, last_id = 0, ""
    async with aconnect_sse(client, "GET", url) as source:
        source.response.raise_for_status()
        async for sse in source.aiter_sse():
            count += 1
            if count == events:
                last_id = sse.id
                break
    elapsed = time.perf_counter() - start
    if last_id != str(events):
        raise RuntimeError(f"{url}: event {events} had id {last_id!r}")
    return elapsed


async def replay_server(url: str, events: int) -> float:
    async with httpx.AsyncClient(timeout=httpx.Timeout(30, read=None)) as client:
        return await replay(client, url, events)


async def replay_in_memory(chunks: list[bytes], events: int) -> float:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as client:
        return await replay(client, "http://in-memory/events", events)


def fill(base: str, events: int) -> None:
    with httpx.Client(timeout=FILL_TIMEOUT) as client:
        response = client.post(f"{base}/bench/fill", json={"stream": STREAM, "count": events})
        response.raise_for_status()
        if response.json()["seq"] != events:
            raise RuntimeError(f"{base}: filled up to {response.json()['seq']}, not {events}")


def gateway_bytes(server: Server) -> list[bytes]:
    """What the gateway sends for the stream, in CHUNK-sized pieces."""
    with EventLog(f"sqlite:///{server.db_file}") as log:
        body, after = [], 0
        while page := log.read(after=after, stream=STREAM, limit=PAGE):
            body.append(frames(page))
            after = page[-1].seq
    data = b"".join(body)
    return [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--events", type=int, default=100_000, help="events replayed (100 000)")
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    add_server_options(parser)
    args = parser.parse_args()
    apply_server_options(args)
    n = args.events

    vs_peer = Case(f"replay {n:,}: gateway_kit vs sse-starlette", 5.0)
    vs_memory = Case(f"replay {n:,}: gateway_kit vs httpx-sse in memory", 0.5)
    peer_vs_memory = Case(f"replay {n:,}: sse-starlette vs httpx-sse in memory", None)
    print(f"{server_stack()}; {args.rounds} rounds; client: httpx-sse in this process")
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    try:
        with Server(work, "peer") as peer, Server(work, "gateway", db=True) as gateway:
            started = time.perf_counter()
            fill(peer.url, n)
            fill(gateway.url, n)
            chunks = gateway_bytes(gateway)
            size = sum(map(len, chunks))
            print(f"  filled both in {time.perf_counter() - started:.1f} s; {size:,} bytes of SSE")
            urls = {
                "peer": f"{peer.url}/streams/{STREAM}/events",
                "gateway": f"{gateway.url}/gateway/streams/{STREAM}/events",
            }
            servers = {"peer": peer, "gateway": gateway}
            cpu: dict[str, list[float]] = {"peer": [], "gateway": []}

            def run(kind: str) -> float:
                if kind == "memory":
                    return n / asyncio.run(replay_in_memory(chunks, n))
                before = servers[kind].cpu_seconds()
                rate = n / asyncio.run(replay_server(urls[kind], n))
                cpu[kind].append((servers[kind].cpu_seconds() - before) / n * 1e6)
                return rate

            kinds = ["peer", "gateway", "memory"]
            for kind in kinds:
                run(kind)  # warm-up: thread pools, caches, the gateway's live reader
            for rnd in range(args.rounds):
                order = kinds[rnd % 3 :] + kinds[: rnd % 3]
                rate = {kind: run(kind) for kind in order}
                vs_peer.add(rate["gateway"], rate["peer"])
                vs_memory.add(rate["gateway"], rate["memory"])
                peer_vs_memory.add(rate["peer"], rate["memory"])
                line = ", ".join(f"{kind} {rate[kind]:,.0f}" for kind in kinds)
                print(f"  round {rnd + 1}/{args.rounds}: events/s {line}", flush=True)
    finally:
        work.cleanup()
    for kind, case in (("gateway", vs_peer), ("peer", peer_vs_memory)):
        # CPU time is steadier than wall time on a busy machine: it shows the server's own cost.
        per_event = statistics.median(cpu[kind][1:])
        case.notes.append(f"{kind} server CPU: {per_event:.1f} us per event replayed")
    print_table(
        "Replay over SSE (ratio = first / second)",
        [vs_peer, vs_memory, peer_vs_memory],
        "first",
        "second",
        unit="events/s",
    )

    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
