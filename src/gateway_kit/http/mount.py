"""`Mount`: an ASGI sub-application at one path, for HTTP and websocket requests alike.

The sub-application sees the request as it came (its full path and root path unchanged):
python-socketio's `ASGIApp`, the one mounted at ``{prefix}/socket.io``, matches the full path
itself (its ``socketio_path``). Lifespan messages are not sent to it, as Starlette's `Mount`
does not send them either; everything else passes on.
"""

from __future__ import annotations

from ..types import ASGIApp, Receive, Scope, Send
from .request import relative_path


class Mount:
    def __init__(self, app: ASGIApp, *, path: str, mounted: ASGIApp) -> None:
        self.app = app
        self.path = path.rstrip("/")
        self.mounted = mounted
        self._under = self.path + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path = relative_path(scope)
            if path == self.path or path.startswith(self._under):
                await self.mounted(scope, receive, send)
                return
        await self.app(scope, receive, send)
