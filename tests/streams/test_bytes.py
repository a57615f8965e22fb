"""Pages and replays capped by the bytes of their events' data (`max_page_bytes`), not only by
how many events they hold: a page ends with the event that brings it to the cap, holds one
event however large, and a client that follows its cursor gets every event once, in order."""

from __future__ import annotations

import asyncio
from typing import Any

from gateway_kit import Event, EventLog, GatewaySettings, StreamSettings
from gateway_kit.log.pages import data_size
from tests.support.asgi_driver import Request
from tests.support.waiting import settled

from .conftest import MakeGateway

CAP = 3000
SIZES = [1000, 1000, 1000, 1000, 7000, 10, 10, 2500, 600, 3000, 1, 1]


def fill(log: EventLog, run_id: str = "r1") -> list[Event]:
    """Events of `SIZES` bytes of data, some of them non-ASCII (counted in UTF-8 bytes)."""
    events = []
    for i, size in enumerate(SIZES):
        text = "é" * (size // 2) if i % 3 == 0 else "x" * size  # about `size` bytes either way
        events.append(log.append("conv", "Message", {"t": text}, run_id=run_id))
    settled(log)  # readers by cursor are given them (on PostgreSQL, once older transactions end)
    return events


def assert_capped(page: list[dict[str, Any]], by_seq: dict[int, Event]) -> None:
    """Every event but the last leaves the page under the cap: it stopped once it reached it."""
    sizes = [data_size(by_seq[e["seq"]]) for e in page]
    assert sum(sizes[:-1]) < CAP, sizes


def test_a_json_page_ends_at_max_page_bytes_and_next_after_walks_every_event(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(settings=GatewaySettings(streams=StreamSettings(max_page_bytes=CAP)))
    events = fill(log)
    by_seq = {e.seq: e for e in events}

    async def page(after: int) -> dict[str, Any]:
        request = await Request(
            gateway,
            "/gateway/streams/conv/events",
            params={"after": str(after)},
            headers={"accept": "application/json"},
        ).run()
        body: dict[str, Any] = request.json()
        return body

    async def main() -> list[list[dict[str, Any]]]:
        pages, after = [], 0
        while (body := await page(after))["events"]:
            pages.append(body["events"])
            assert body["next_after"] == body["events"][-1]["seq"]
            after = body["next_after"]
        return pages

    pages = asyncio.run(main())
    for events_of_page in pages:
        assert_capped(events_of_page, by_seq)
    assert [e["seq"] for p in pages for e in p] == [e.seq for e in events]
    assert len(pages) > 3
    big = next(e for e in events if data_size(e) > CAP)
    alone = asyncio.run(page(big.seq - 1))  # an event larger than the cap: a page of its own
    assert ([e["seq"] for e in alone["events"]], alone["next_after"]) == ([big.seq], big.seq)


def test_an_sse_replay_in_byte_capped_pages_sends_every_event_once(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(settings=GatewaySettings(streams=StreamSettings(max_page_bytes=CAP)))
    events = fill(log)
    log.append("conv", "Finish", {}, run_id="r1")

    async def main() -> None:
        streams = [
            Request(gateway, "/gateway/streams/conv/events").start(),
            Request(gateway, "/gateway/runs/r1/events").start(),
            Request(gateway, "/gateway/streams/conv/events", params={"after": "2"}).start(),
        ]
        expected = [e.seq for e in events] + [events[-1].seq + 1]
        for request, want in zip(streams, [expected, expected, expected[2:]], strict=True):
            got = await request.wait_events(len(want))
            assert [e["seq"] for e in got] == want
        await streams[1].finished()  # the run's stream ends after its Finish
        for request in (streams[0], streams[2]):
            request.disconnect()
            await request.finished()

    asyncio.run(main())


def test_a_legacy_poll_ends_at_max_page_bytes_and_next_offset_walks_every_event(
    log: EventLog, make_gateway: MakeGateway
) -> None:
    gateway = make_gateway(settings=GatewaySettings(streams=StreamSettings(max_page_bytes=CAP)))
    events = fill(log, run_id="task-1")
    by_idx = dict(enumerate(events))

    async def main() -> list[list[dict[str, Any]]]:
        pages, offset = [], 0
        while True:
            request = await Request(
                gateway, "/api/tasks/task-1", params={"from": str(offset)}
            ).run()
            body = request.json()
            if not body["events"]:
                return pages
            pages.append(body["events"])
            offset = body["next_offset"]

    pages = asyncio.run(main())
    for page in pages:
        sizes = [data_size(by_idx[e["idx"]]) for e in page]
        assert sum(sizes[:-1]) < CAP, sizes
    assert [e["idx"] for page in pages for e in page] == list(range(len(events)))
    assert len(pages) > 3
