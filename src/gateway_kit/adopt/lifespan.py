"""`running`: an ASGI app's lifespan around the requests of a check, as a server runs it.

``lifespan.startup`` before the first request and ``lifespan.shutdown`` after the last, each
awaited for its ``.complete``. An app that raises on the lifespan scope, or returns, before
it answers the start-up does not use the lifespan: it is served without one, as uvicorn does.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from ..exceptions import GatewayKitError
from ..types import ASGIApp, Message

STARTUP_TIMEOUT = 60.0
SHUTDOWN_TIMEOUT = 30.0
STARTUP_FAILED = "{name} failed to start: {reason}"
STARTUP_TOO_LONG = f"{{name}} did not start within {STARTUP_TIMEOUT:g} seconds"


class StartupFailed(GatewayKitError):
    """An app's lifespan start-up failed: nothing can be replayed against it."""


@asynccontextmanager
async def running(app: ASGIApp, name: str) -> AsyncIterator[None]:
    to_app: asyncio.Queue[Message] = asyncio.Queue()
    from_app: asyncio.Queue[Message] = asyncio.Queue()

    async def send(message: Message) -> None:
        await from_app.put(message)

    async def lifespan() -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0", "spec_version": "2.0"}, "state": {}}
        await app(scope, to_app.get, send)

    task = asyncio.create_task(lifespan())
    await to_app.put({"type": "lifespan.startup"})
    answer = await first_answer(task, from_app, STARTUP_TIMEOUT)
    if answer is None and not task.done():
        task.cancel()
        raise StartupFailed(STARTUP_TOO_LONG.format(name=name))
    if answer is not None and answer["type"] == "lifespan.startup.failed":
        raise StartupFailed(STARTUP_FAILED.format(name=name, reason=answer.get("message", "")))
    try:
        yield
    finally:
        if answer is not None:  # the app uses its lifespan
            await to_app.put({"type": "lifespan.shutdown"})
            await first_answer(task, from_app, SHUTDOWN_TIMEOUT)
        if not task.done():
            task.cancel()
        await asyncio.wait({task})
        if not task.cancelled():
            task.exception()  # an app without a lifespan raises on it: that was its answer


async def first_answer(
    task: asyncio.Task[None], answers: asyncio.Queue[Message], timeout: float
) -> Message | None:
    """The app's next lifespan message, or None when it ended or took `timeout` seconds."""
    getting = asyncio.create_task(answers.get())
    await asyncio.wait({task, getting}, timeout=timeout, return_when="FIRST_COMPLETED")
    if getting.done():
        return getting.result()
    getting.cancel()
    return None
