"""The hand-over from replay to live: the log's events up to the live feed's head, by pages.

A reader that replays and then goes on live (an SSE response, a Socket.IO connection joining a
room, a room catching up) first registers for live events and notes how far they had been
handed out: its `head` (`Subscription.high_water`, `RoomFeed.last`). Everything up to `head`
is in the log, everything after it arrives live. So the replay reads the log after its cursor
up to `head` and no further, and the live side then drops the seqs the replay sent: no gap, and
no event twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any

from ..log import Event, EventLog
from ..log.pages import may_continue


async def replay_pages(
    log: EventLog,
    after: int,
    head: int,
    *,
    limit: int,
    max_bytes: int | None,
    stream: str | None = None,
    run_id: str | None = None,
    first: list[Event] | None = None,
    read_ahead: bool = False,
    before_read: Callable[[], Awaitable[bool]] | None = None,
) -> AsyncGenerator[list[Event], None]:
    """The events of `stream` (or of run `run_id`) after `after` up to `head`, a page at a time.

    A page holds at most `limit` events and stops at `max_bytes` of their data (besides one
    event). A run's pages end with its terminal event. `first` is the first page, when the
    caller has read it already. `before_read()` is awaited before each read, and False ends the
    pages there (the reader cannot take more). With `read_ahead` (and no `before_read`), the
    next page is read while the caller handles a page full by count (small events, whose read
    is worth hiding behind the caller's writes); a page cut by bytes is handled first: one page
    held, not two. Close the iterator when leaving it early (`contextlib.aclosing`): a read
    ahead is then cancelled.
    """
    page = first
    while after < head:
        if page is None:
            if before_read is not None and not await before_read():
                return
            page = await log.aread(after, stream, limit, run_id=run_id, max_bytes=max_bytes)
        reached_head = bool(page) and page[-1].seq >= head
        if reached_head and page[-1].seq > head:
            page = [e for e in page if e.seq <= head]
        if not page:
            return
        if run_id is not None:
            end = next((i for i, e in enumerate(page) if e.is_terminal), None)
            if end is not None:
                page, reached_head = page[: end + 1], True
        more = not reached_head and may_continue(page, limit, max_bytes)
        upcoming = None
        if read_ahead and more and len(page) >= limit and before_read is None:
            read = log.aread(page[-1].seq, stream, limit, run_id=run_id, max_bytes=max_bytes)
            upcoming = asyncio.ensure_future(read)
        try:
            yield page
        except BaseException:
            if upcoming is not None:
                upcoming.cancel()
                upcoming.add_done_callback(_consume)
            raise
        if not more:
            return
        after = page[-1].seq
        page = None if upcoming is None else await upcoming


def _consume(future: asyncio.Future[Any]) -> None:
    """Retrieve an abandoned read's outcome, so its error is not reported as never retrieved."""
    if not future.cancelled():
        future.exception()
