"""A server's memory stays bounded by bytes, not by how many events a page or replay holds.

A real uvicorn process serves a stream of 1 MiB events to four clients at once, over JSON
pages and over SSE replay; its peak resident memory (``VmHWM`` of ``/proc/PID/status``, reset
just before the clients start) may grow by `RSS_GROWTH_BOUND` at most over what it held after a
warm-up.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx

from gateway_kit import EventLog
from gateway_kit.settings import DEFAULT_MAX_PAGE_BYTES
from tests.support.processes import gateway_process

MIB = 1024 * 1024
EVENTS = 40
EVENT_BYTES = MIB - 64  # the data of one event, with room for its JSON around it
CLIENTS = 4
# What one client may hold the server to: the page read from the log (the cap, and the event
# that reached it), and about as much again twice over in what is made of it while it is
# written (each event's envelope, its frame and their bytes; the server's write buffer) and in
# what the allocator keeps of it. Besides the clients: the reader threads' SQLite caches and
# allocator slack. Measured: about 16 MiB a client; before the cap, a page held all 40 MiB of
# the stream, several times over (+290 MiB for these four clients).
PAGES_PER_CLIENT = 3
ALLOWANCE = 32 * MIB
RSS_GROWTH_BOUND = CLIENTS * PAGES_PER_CLIENT * (DEFAULT_MAX_PAGE_BYTES + MIB) + ALLOWANCE
STREAM = "big"
TIMEOUT = 60.0


def status(pid: int, field: str) -> int:
    """A memory figure of /proc/PID/status, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def reset_peak(pid: int) -> None:
    # Writing 5 to clear_refs resets the peak resident set size (VmHWM) to the current one.
    Path(f"/proc/{pid}/clear_refs").write_text("5")


def fill(db_url: str) -> None:
    with EventLog(db_url) as log:
        for i in range(EVENTS):
            log.append(STREAM, "Chunk", {"text": chr(ord("a") + i % 26) * EVENT_BYTES})
        log.append("small", "Message", {"text": "hi"})


async def page_through(client: httpx.AsyncClient, stream: str) -> int:
    """Read the whole stream as JSON pages; how many events it held."""
    after, seen = 0, 0
    while True:
        answer = await client.get(
            f"/gateway/streams/{stream}/events",
            params={"after": after},
            headers={"accept": "application/json"},
        )
        assert answer.status_code == 200, answer.text
        page = json.loads(answer.content)
        if not page["events"]:
            return seen
        seen += len(page["events"])
        assert page["next_after"] > after
        after = page["next_after"]


async def replay(client: httpx.AsyncClient, stream: str, count: int) -> None:
    """Read the stream over SSE until `count` events came, then hang up."""
    seen = 0
    async with client.stream("GET", f"/gateway/streams/{stream}/events") as answer:
        assert answer.status_code == 200
        async for line in answer.aiter_lines():
            if line.startswith("id: "):
                seen += 1
                if seen == count:
                    return


async def read_concurrently(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        counts = await asyncio.gather(*(page_through(client, STREAM) for _ in range(CLIENTS)))
        assert counts == [EVENTS] * CLIENTS
        await asyncio.gather(*(replay(client, STREAM, EVENTS) for _ in range(CLIENTS)))


async def warm_up(url: str) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        assert await page_through(client, "small") == 1
        await replay(client, "small", 1)


def test_four_clients_of_a_stream_of_big_events_keep_the_server_within_its_bound(
    tmp_path: Path,
) -> None:
    db_url = f"sqlite:///{tmp_path}/gateway.db"
    fill(db_url)
    with gateway_process(
        "tests.streams.memory_process", db_url, tmp=tmp_path, name="memory"
    ) as server:
        pid = server.proc.pid
        asyncio.run(warm_up(server.url))
        base = status(pid, "VmRSS")
        reset_peak(pid)
        asyncio.run(asyncio.wait_for(read_concurrently(server.url), TIMEOUT))
        peak = status(pid, "VmHWM")
    growth = peak - base
    print(
        f"RSS {base / MIB:.0f} MiB after warm-up, peak {peak / MIB:.0f} MiB: "
        f"+{growth / MIB:.0f} MiB (bound {RSS_GROWTH_BOUND / MIB:.0f} MiB)"
    )
    assert growth <= RSS_GROWTH_BOUND, server.said()
