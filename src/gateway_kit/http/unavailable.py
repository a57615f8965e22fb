"""`DatabaseUnavailableAnswer`: a request that needs the database while it cannot be reached is
answered 503 with ``Retry-After`` and the JSON error ``database_unavailable``.

It sits at the top of the stack, so that whichever part raised `DatabaseUnavailable` (identity,
a route, the legacy poll), the client hears the same: try again soon, not "log in again" and
not a 500. A response already under way cannot change its status: it ends, and its client
resumes by cursor. A websocket handshake is refused.
"""

from __future__ import annotations

import logging

from ..exceptions import DatabaseUnavailable
from ..types import ASGIApp, Receive, Scope, Send
from .errors import DATABASE_UNAVAILABLE, send_error

logger = logging.getLogger("gateway_kit")

# Seconds a client is told to wait: about the longest pause between two attempts to reconnect.
RETRY_AFTER_SECONDS = 2
DATABASE_UNAVAILABLE_MESSAGE = "the database cannot be reached right now; try again shortly"
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_SECONDS).encode("ascii"))
# Closing before accepting refuses the handshake; 1013 is "try again later".
WEBSOCKET_REFUSAL = {"type": "websocket.close", "code": 1013, "reason": "database unavailable"}


async def send_unavailable(send: Send) -> None:
    await send_error(send, 503, DATABASE_UNAVAILABLE, DATABASE_UNAVAILABLE_MESSAGE, [RETRY_AFTER])


class DatabaseUnavailableAnswer:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        # `send` is passed on as it is, not wrapped: the stream routes read the server's
        # connection off the bound method (`gateway_kit.streams.shutdown`).
        try:
            await self.app(scope, receive, send)
        except DatabaseUnavailable as exc:
            logger.warning("%s %s: %s", scope.get("method", "WEBSOCKET"), scope["path"], exc)
            try:
                if scope["type"] == "http":
                    await send_unavailable(send)
                else:
                    await send(WEBSOCKET_REFUSAL)
            except Exception:  # a response had started: the server refuses a second one
                raise exc from None
