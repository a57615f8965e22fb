"""`replay_pages`, the replay both an SSE response and a Socket.IO connection make before they go
on live: up to the live feed's head and no further, a page at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator

from gateway_kit import Event, EventLog
from gateway_kit.streams.replay import replay_pages
from tests.support.waiting import settled


async def collected(pages: AsyncGenerator[list[Event], None]) -> list[list[int]]:
    return [[event.seq for event in page] async for page in pages]


def test_a_replay_stops_at_the_head_and_leaves_what_follows_to_the_live_feed(
    log: EventLog,
) -> None:
    seqs = [log.append("a" if i % 3 else "b", "Message", {"i": i}).seq for i in range(1, 10)]
    head = seqs[6]  # 7 is the head; 8 and 9 are the live feed's
    ours = [seq for i, seq in enumerate(seqs, 1) if i % 3 and seq <= head]
    settled(log)

    pages = asyncio.run(collected(replay_pages(log, 0, head, limit=2, max_bytes=None, stream="a")))

    assert [seq for page in pages for seq in page] == ours
    assert all(len(page) <= 2 for page in pages)


def test_a_runs_replay_ends_with_its_terminal_event(log: EventLog) -> None:
    log.append("s", "Message", {"text": "hi"}, run_id="r-1")
    finish = log.append("s", "Finish", {}, run_id="r-1")
    later = log.append("s", "Message", {"text": "after"}, run_id="r-1")
    settled(log)

    pages = asyncio.run(
        collected(replay_pages(log, 0, later.seq, limit=10, max_bytes=None, run_id="r-1"))
    )

    assert pages[-1][-1] == finish.seq


def test_a_reader_that_cannot_take_more_ends_the_replay_before_the_next_read(
    log: EventLog,
) -> None:
    seqs = [log.append("a", "Message", {"i": i}).seq for i in range(6)]
    settled(log)
    answers = iter([True, False])

    async def before_read() -> bool:
        return next(answers)

    replay = replay_pages(
        log, 0, log.last_seq(), limit=2, max_bytes=None, stream="a", before_read=before_read
    )
    pages = asyncio.run(collected(replay))

    assert pages == [seqs[:2]]
