"""An `httpx.AsyncClient` of an ASGI app served in-process with its lifespan, as a server does.

`httpx.ASGITransport` sends requests only: a `Gateway` served by it never gets its lifespan, so
its background work (the pumps reading goose, the run lifecycle, the billing) is started by the
first request that needs it and never stopped. `asgi_client` starts the app's lifespan before
the first request and shuts it down when the block ends, so a test ends with nothing left
running, and a start-up failure is raised instead of showing as a later request's error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from gateway_kit.types import ASGIApp, Message

DEFAULT_APP_URL = "http://gateway.test"
LIFESPAN_TIMEOUT = 30.0
STARTUP_FAILED = "the app's lifespan start-up failed: {message}"
NO_ANSWER = "the app ended its lifespan without answering {kind!r}"


class _Lifespan:
    """One lifespan of `app`, driven as a server drives it."""

    def __init__(self, app: ASGIApp) -> None:
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.outbox: asyncio.Queue[Message] = asyncio.Queue()
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}

        async def serve() -> None:
            await app(scope, self.inbox.get, self.outbox.put)

        self.task: asyncio.Task[None] = asyncio.create_task(serve())

    async def ask(self, kind: str) -> Message:
        """Send `kind` and wait for the app's answer (or for the app to end without one)."""
        await self.inbox.put({"type": kind})
        answer = asyncio.create_task(self.outbox.get())
        done, _ = await asyncio.wait(
            {answer, self.task}, timeout=LIFESPAN_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if answer in done:
            return answer.result()
        answer.cancel()
        if self.task in done:
            self.task.result()  # what the app raised, if anything
        raise RuntimeError(NO_ANSWER.format(kind=kind))


@asynccontextmanager
async def asgi_client(
    app: ASGIApp, base_url: str = DEFAULT_APP_URL
) -> AsyncIterator[httpx.AsyncClient]:
    """`async with asgi_client(gateway) as client:` requests to `app` in-process, between its
    lifespan's start-up and shut-down; `RuntimeError` when the start-up fails."""
    lifespan = _Lifespan(app)
    started = await lifespan.ask("lifespan.startup")
    if started["type"] != "lifespan.startup.complete":
        lifespan.task.cancel()
        raise RuntimeError(STARTUP_FAILED.format(message=started.get("message", "")))
    try:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
            yield client
    finally:
        await lifespan.ask("lifespan.shutdown")
        await asyncio.wait_for(lifespan.task, LIFESPAN_TIMEOUT)
