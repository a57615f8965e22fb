"""`PrefixNotFound`: under the gateway's prefix, what no part served is a JSON 404.

It sits below every part that serves the prefix, so a request they all passed on never reaches
the wrapped app: the prefix belongs to the gateway.
"""

from __future__ import annotations

from ..types import ASGIApp, Receive, Scope, Send
from .errors import NOT_FOUND, send_error
from .request import relative_path

NOT_FOUND_MESSAGE = "no such gateway endpoint: {path}"
# Closing before accepting makes the server refuse the handshake (HTTP 403).
WEBSOCKET_NOT_FOUND = {"type": "websocket.close", "code": 1000}


async def not_found(scope: Scope, receive: Receive, send: Send) -> None:
    """The answer to a request nothing serves: a JSON 404, or a refused websocket."""
    if scope["type"] == "http":
        await send_error(send, 404, NOT_FOUND, NOT_FOUND_MESSAGE.format(path=scope["path"]))
    elif scope["type"] == "websocket":
        await send(WEBSOCKET_NOT_FOUND)


class PrefixNotFound:
    def __init__(self, app: ASGIApp, *, prefix: str) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")
        self._under = self.prefix + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path = relative_path(scope)
            if path == self.prefix or path.startswith(self._under):
                await not_found(scope, receive, send)
                return
        await self.app(scope, receive, send)
