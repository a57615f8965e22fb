"""Client processes of the stream benchmarks: ``python bench/_clients.py JOB_JSON``.

A job's ``mode`` says what the process runs; it prints ``ready`` once its clients are connected,
then one JSON line with what it measured.

- ``sse``: `count` httpx-sse subscribers of `url`. Each event's data carries ``t``, the wall-clock
  time its append was sent (``time.time()``; one clock for every process of this machine), and
  ``i``, its index: latency is the arrival time minus ``t``. A subscriber stops after event
  ``expect - 1``; events below ``warmup`` are not counted.
- ``poll``: `count` legacy clients logged in with a session cookie, each polling
  ``GET /api/tasks/<task>?from=<next_offset>`` and sleeping `interval` after every answer (the
  browser's ``setTimeout(poll, 250)``), started at random phases.
- ``idle``: `count` raw sockets, each sending one SSE request and reading its response head, then
  holding the connection open without reading, until a line arrives on stdin.
- ``load``: `concurrency` httpx clients sending GET `url` back to back for `seconds` (the
  fallback load generator when wrk is not installed); with `method` and `body`, that request
  instead, and with `header_variants`, client k's headers are the k-th (round robin). It
  counts the answers and the bytes of their bodies.
- ``sockets``: `count` python-socketio clients of `base` over websocket, client k subscribed to
  stream ``s<k mod streams>`` (with a one-time ticket first when `tickets` is set), tallied as
  ``sse`` is; it says ``ready`` once all are connected and subscribed.
- ``envelopes``: one httpx-sse subscriber of a gateway stream `url`, noting for every event the
  moment its envelope was parsed (``time.perf_counter()``, which on Linux is CLOCK_MONOTONIC,
  one clock for every process of the machine), its seq, type, run_id and upstream_event_id;
  it stops after `expect` run-terminal events (``Finish``/``Error`` with a run_id).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

import httpx
from _harness import USER, raise_open_files
from httpx_sse import aconnect_sse

Job = dict[str, Any]
CONNECT_TIMEOUT = 30.0


class Tally:
    """What the subscribers of one process saw."""

    def __init__(self, job: Job) -> None:
        self.expect: int = job["expect"]
        self.warmup: int = job["warmup"]
        self.latencies: list[float] = []  # milliseconds
        self.counts: list[int] = []  # events each subscriber received
        self.duplicates = 0

    def take(self, data: dict[str, Any], now: float, seen: set[int]) -> bool:
        """Record one event; True when it was the last one expected."""
        i = data["i"]
        if i in seen:
            self.duplicates += 1
        seen.add(i)
        if i >= self.warmup:
            self.latencies.append(round((now - data["t"]) * 1000, 3))
        return bool(i == self.expect - 1)

    def result(self) -> dict[str, Any]:
        return {"latencies": self.latencies, "counts": self.counts, "duplicates": self.duplicates}


async def sse_subscriber(
    client: httpx.AsyncClient, job: Job, tally: Tally, connected: Callable[[], None]
) -> None:
    seen: set[int] = set()
    try:
        async with aconnect_sse(client, "GET", job["url"]) as source:
            source.response.raise_for_status()
            connected()
            async for sse in source.aiter_sse():
                now = time.time()
                if not sse.data:
                    # A ": ping" comment: httpx-sse yields the blank line after it as an empty
                    # event once a Last-Event-ID has been seen.
                    continue
                if tally.take(json.loads(sse.data)["data"], now, seen):
                    break
    finally:
        tally.counts.append(len(seen))


async def poll_subscriber(
    client: httpx.AsyncClient, job: Job, tally: Tally, connected: Callable[[], None]
) -> None:
    seen: set[int] = set()
    url = f"{job['base']}/api/tasks/{job['task']}"
    offset, interval = 0, job["interval"]
    connected()
    await asyncio.sleep(random.uniform(0, interval))
    try:
        while True:
            response = await client.get(url, params={"from": offset})
            now = time.time()
            response.raise_for_status()
            answer = response.json()
            # A list, not a generator: every event of the answer is tallied before returning.
            if any([tally.take(e["data"], now, seen) for e in answer["events"]]):
                return
            offset = answer["next_offset"]
            await asyncio.sleep(interval)
    finally:
        tally.counts.append(len(seen))


async def subscribers(job: Job) -> dict[str, Any]:
    tally = Tally(job)
    count = job["count"]
    limits = httpx.Limits(max_connections=count + 1, max_keepalive_connections=count + 1)
    timeout = httpx.Timeout(CONNECT_TIMEOUT, read=None)
    async with httpx.AsyncClient(limits=limits, timeout=timeout) as client:
        subscriber = sse_subscriber
        if job["mode"] == "poll":
            subscriber = poll_subscriber
            login = {"username": USER, "password": USER}
            (await client.post(f"{job['base']}/login", json=login)).raise_for_status()
        all_connected = asyncio.Event()
        pending = count

        def connected() -> None:
            nonlocal pending
            pending -= 1
            if not pending:
                all_connected.set()

        tasks = [
            asyncio.create_task(subscriber(client, job, tally, connected)) for _ in range(count)
        ]
        await asyncio.wait_for(all_connected.wait(), CONNECT_TIMEOUT)
        print("ready", flush=True)
        _, late = await asyncio.wait(tasks, timeout=job["timeout"])
        for task in late:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return {**tally.result(), "late": len(late)}


async def sockets(job: Job) -> dict[str, Any]:
    import socketio

    tally = Tally(job)
    # Connects in flight, per process: the tickets of both processes stay under the per-user cap.
    gate = asyncio.Semaphore(10)
    finished: list[asyncio.Event] = []
    clients: list[Any] = []

    async def one(k: int, http: httpx.AsyncClient) -> None:
        seen: set[int] = set()
        done = asyncio.Event()
        finished.append(done)
        sio = socketio.AsyncClient(reconnection=False)
        clients.append(sio)

        async def on_event(envelope: dict[str, Any]) -> None:
            if tally.take(envelope["data"], time.time(), seen):
                tally.counts.append(len(seen))
                done.set()

        sio.on("event", on_event)
        async with gate:
            auth = None
            if job["tickets"]:
                answer = await http.post(f"{job['base']}/gateway/socket-tickets")
                auth = {"ticket": answer.raise_for_status().json()["ticket"]}
            await sio.connect(
                job["base"], socketio_path="gateway/socket.io", auth=auth,
                transports=["websocket"], wait_timeout=CONNECT_TIMEOUT,
            )  # fmt: skip
            ack = await sio.call("subscribe", {"stream": f"s{k % job['streams']}"}, timeout=30)
            if not ack.get("ok"):
                raise RuntimeError(f"subscribe refused: {ack}")

    async with httpx.AsyncClient(timeout=CONNECT_TIMEOUT) as http:
        await asyncio.gather(
            *(one(k, http) for k in range(job["first"], job["first"] + job["count"]))
        )
    print("ready", flush=True)
    waiting = [asyncio.create_task(done.wait()) for done in finished]
    _, late = await asyncio.wait(waiting, timeout=job["timeout"])
    for task in late:
        task.cancel()
    await asyncio.gather(*(sio.disconnect() for sio in clients), return_exceptions=True)
    return {**tally.result(), "late": len(late)}


async def idle(job: Job) -> dict[str, Any]:
    head = (
        f"GET {job['path']} HTTP/1.1\r\nHost: {job['host']}:{job['port']}\r\n"
        "Accept: text/event-stream\r\n\r\n"
    ).encode()
    gate = asyncio.Semaphore(job["parallel"])  # the listen backlog need not hold them all

    async def open_one() -> asyncio.StreamWriter:
        async with gate:
            reader, writer = await asyncio.open_connection(job["host"], job["port"])
            writer.write(head)
            status = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), CONNECT_TIMEOUT)
            if not status.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"not a stream: {status[:80]!r}")
            return writer

    writers = await asyncio.gather(*[open_one() for _ in range(job["count"])])
    print(f"ready {len(writers)}", flush=True)
    await asyncio.to_thread(sys.stdin.readline)
    for writer in writers:
        writer.close()
    return {"opened": len(writers)}


async def load(job: Job) -> dict[str, Any]:
    done = errors = received = 0
    stop_at = 0.0
    method, body = job.get("method", "GET"), job.get("body")
    variants: list[dict[str, str]] = job.get("header_variants") or [{}]

    async def worker(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
        nonlocal done, errors, received
        while time.perf_counter() < stop_at:
            response = await client.request(method, job["url"], content=body, headers=headers)
            received += len(response.content)
            if response.status_code == 200:
                done += 1
            else:
                errors += 1

    limits = httpx.Limits(max_connections=job["concurrency"])
    headers = job.get("headers") or {}
    async with httpx.AsyncClient(limits=limits, timeout=CONNECT_TIMEOUT, headers=headers) as client:
        print("ready", flush=True)
        start = time.perf_counter()
        stop_at = start + job["seconds"]
        await asyncio.gather(
            *[worker(client, variants[k % len(variants)]) for k in range(job["concurrency"])]
        )
        elapsed = time.perf_counter() - start
    return {"requests": done, "errors": errors, "bytes": received, "seconds": elapsed}


async def envelopes(job: Job) -> dict[str, Any]:
    seen: list[list[Any]] = []
    ended = 0
    timeout = httpx.Timeout(CONNECT_TIMEOUT, read=None)
    async with (
        httpx.AsyncClient(timeout=timeout) as client,
        aconnect_sse(client, "GET", job["url"]) as source,
    ):
        source.response.raise_for_status()
        print("ready", flush=True)

        async def read() -> None:
            nonlocal ended
            async for sse in source.aiter_sse():
                if not sse.data:
                    continue  # the blank line after a ": ping" comment
                envelope = json.loads(sse.data)
                now = time.perf_counter()
                kind, run_id = envelope["type"], envelope["run_id"]
                seen.append([now, envelope["seq"], kind, run_id, envelope["upstream_event_id"]])
                if kind in ("Finish", "Error") and run_id is not None:
                    ended += 1
                    if ended >= job["expect"]:
                        return

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(read(), job["timeout"])
    return {"events": seen, "ended": ended}


MODES: dict[str, Callable[[Job], Coroutine[Any, Any, dict[str, Any]]]] = {
    "sse": subscribers,
    "poll": subscribers,
    "idle": idle,
    "load": load,
    "sockets": sockets,
    "envelopes": envelopes,
}


def main() -> None:
    raise_open_files()
    job: Job = json.loads(sys.argv[1])
    print(json.dumps(asyncio.run(MODES[job["mode"]](job))), flush=True)


if __name__ == "__main__":
    main()
