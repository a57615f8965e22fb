"""`DatabaseUnavailableAnswer`: a request that needs the database while it cannot be reached,
or an access plugin the gateway cannot ask, is answered 503 with ``Retry-After`` and a JSON
error: ``database_unavailable``, or ``plugin_unavailable`` (`PluginUnavailable`: no thread was
free to ask the plugin within the plugin timeout, or it has too many calls hung).

It sits at the top of the stack, so that whichever part raised `DatabaseUnavailable` (identity,
a route, the legacy poll), the client hears the same: try again soon, not "log in again" and
not a 500. The gateway could not decide, which is not a refusal: nothing is served, and a
client retries instead of logging out. A response already under way cannot change its status:
it ends, and its client resumes by cursor. A websocket handshake is refused.
"""

from __future__ import annotations

import logging

from ..exceptions import DatabaseUnavailable, PluginUnavailable
from ..types import ASGIApp, Receive, Scope, Send
from .errors import DATABASE_UNAVAILABLE, PLUGIN_UNAVAILABLE, send_error

logger = logging.getLogger(__name__)

# Seconds a client is told to wait: about the longest pause between two attempts to reconnect.
RETRY_AFTER_SECONDS = 2
DATABASE_UNAVAILABLE_MESSAGE = "the database cannot be reached right now; try again shortly"
PLUGIN_UNAVAILABLE_MESSAGE = (
    "the gateway could not ask its access plugins in time (they are busy); try again shortly"
)
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_SECONDS).encode("ascii"))
# Closing before accepting refuses the handshake; 1013 is "try again later".
WEBSOCKET_REFUSAL = {"type": "websocket.close", "code": 1013, "reason": "database unavailable"}
PLUGIN_WEBSOCKET_REFUSAL = {"type": "websocket.close", "code": 1013, "reason": "plugin unavailable"}


async def send_unavailable(send: Send, error: DatabaseUnavailable | None = None) -> None:
    """The 503 of `error` (a database outage when None)."""
    if isinstance(error, PluginUnavailable):
        code, message = PLUGIN_UNAVAILABLE, PLUGIN_UNAVAILABLE_MESSAGE
    else:
        code, message = DATABASE_UNAVAILABLE, DATABASE_UNAVAILABLE_MESSAGE
    await send_error(send, 503, code, message, [RETRY_AFTER])


async def refuse_unavailable(scope: Scope, send: Send, error: DatabaseUnavailable) -> None:
    """Answer `error` to the request of `scope`, which has sent nothing yet."""
    if scope["type"] == "http":
        await send_unavailable(send, error)
    elif isinstance(error, PluginUnavailable):
        await send(PLUGIN_WEBSOCKET_REFUSAL)
    else:
        await send(WEBSOCKET_REFUSAL)


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
                await refuse_unavailable(scope, send, exc)
            except Exception:  # a response had started: the server refuses a second one
                raise exc from None
