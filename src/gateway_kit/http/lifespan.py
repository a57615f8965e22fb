"""The lifespan of a stack: `Lifespan`, the one part that starts and stops background work.

`Lifespan` sits at the top of a stack and is handed every piece of background work the stack's
parts share (`Work`: pumps, run lifecycle, sweepers, the Socket.IO server, ...). It starts them,
in the order given, when the server's ``lifespan.startup`` passes, before the app below sees it;
some servers run an app without a lifespan, so the first request in an event loop starts them
too. ``lifespan.shutdown`` stops them in the same order (the streams clients hold end first),
again before the app below sees it. The parts below only serve requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from ..types import ASGIApp, Message, Receive, Scope, Send

Action = Callable[[], Awaitable[None]]


async def nothing() -> None:
    return None


@dataclass(frozen=True, slots=True)
class Work:
    """One piece of background work: how it starts and how it stops.

    :param on_request: also started by the first request in an event loop, for servers that
        send no lifespan (False for what only a lifespan start-up may do, such as reopening
        streams that a shutdown closed).
    """

    name: str
    start: Action
    stop: Action = nothing
    on_request: bool = True


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


class Lifespan:
    """:param work: what to start and stop, in that order."""

    def __init__(self, app: ASGIApp, *, work: Sequence[Work]) -> None:
        self.app = app
        self.work = tuple(work)
        self._loop: asyncio.AbstractEventLoop | None = None  # where the work was last started
        # Where a shutdown stopped it: in that loop only the next start-up starts it again (a
        # request served after the shutdown must not undo it); another loop is another run.
        self._stopped_in: asyncio.AbstractEventLoop | None = None

    async def startup(self) -> None:
        self._loop, self._stopped_in = asyncio.get_running_loop(), None
        for work in self.work:
            await work.start()

    async def shutdown(self) -> None:
        self._loop, self._stopped_in = None, asyncio.get_running_loop()
        for work in self.work:
            await work.stop()

    async def _on_request(self) -> None:
        loop = asyncio.get_running_loop()
        if loop is self._loop or loop is self._stopped_in:
            return
        self._loop = loop  # set first: requests arriving meanwhile start nothing twice
        for work in self.work:
            if work.on_request:
                await work.start()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            receive = observe_lifespan(receive, startup=self.startup, shutdown=self.shutdown)
        else:
            await self._on_request()
        await self.app(scope, receive, send)
