"""Watching the lifespan messages that pass through a part on their way to the app below."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..types import Message, Receive

Action = Callable[[], Awaitable[None]]


def observe_lifespan(receive: Receive, *, startup: Action, shutdown: Action) -> Receive:
    """`receive`, running `startup` or `shutdown` as that message passes (before the app below
    sees it: parts higher in the stack act first on both)."""

    async def observed() -> Message:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await startup()
        elif message["type"] == "lifespan.shutdown":
            await shutdown()
        return message

    return observed
