"""Replies goose refuses because the session is still busy: sent again, for a bounded time.

goose keeps one request per session and answers another `reply` with 400 "Session already has
an active request" (`SessionBusy`). The gateway sends a reply only for the one run a stream may
have going, so a busy session is held by a request the gateway is done with: a cancelled one
goose has not let go of yet, or one of a run the gateway ended without goose's end (the log
ended it elsewhere, or goose's stream failed while its request went on). So the reply is sent
again, with a pause that doubles, until `LifecycleSettings.busy_wait` seconds have passed; then
the refusal stands. Before the first retry `release` asks goose to drop the request of the run
that held the session before (goose accepts the cancel of a request it no longer has). A run
that is cancelled or moves on meanwhile is not sent again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from ..exceptions import SessionBusy
from .async_store import AsyncRunStore

FIRST_PAUSE = 0.05  # seconds before the first retry; each later one waits twice as long
MAX_PAUSE = 0.5


async def reply_when_free(
    send: Callable[[], Awaitable[None]],
    *,
    busy_wait: float,
    wanted: Callable[[], Awaitable[bool]],
    release: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """`send()` until goose takes it; its `SessionBusy` again once `busy_wait` seconds have
    passed, or once `wanted()` says the reply is no longer wanted."""
    deadline = time.monotonic() + busy_wait
    pause = FIRST_PAUSE
    while True:
        try:
            await send()
            return
        except SessionBusy:
            left = deadline - time.monotonic()
            if left <= 0 or not await wanted():
                raise
        if release is not None:
            await release()
            release = None
        await asyncio.sleep(min(pause, left))
        pause = min(pause * 2, MAX_PAUSE)


async def still_wanted(runs: AsyncRunStore, request_id: str) -> bool:
    """Whether goose should still get request `request_id`: the current attempt of a run that
    is going on and was not cancelled."""
    run = await runs.by_upstream_request(request_id)
    return (
        run is not None
        and run.active
        and not run.cancel_requested
        and run.upstream_request_id == request_id
    )
