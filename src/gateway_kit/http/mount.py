"""`Mount`: an ASGI sub-application at one path, for HTTP and websocket requests alike.

The sub-application sees the request as it came (its full path and root path unchanged):
python-socketio's `ASGIApp`, the one mounted at ``{prefix}/socket.io``, matches the full path
itself (its ``socketio_path``). Mounted at a second path (``as_path``: where it is mounted
first), it sees each request's path as if it came there. Lifespan messages are not sent to it,
as Starlette's `Mount` does not send them either; everything else passes on.
"""

from __future__ import annotations

from ..types import ASGIApp, Receive, Scope, Send
from .request import RELATIVE_PATH_KEY, relative_path


class Mount:
    def __init__(
        self, app: ASGIApp, *, path: str, mounted: ASGIApp, as_path: str | None = None
    ) -> None:
        self.app = app
        self.path = path.rstrip("/")
        self.mounted = mounted
        self.as_path = as_path.rstrip("/") if as_path is not None else None
        self._under = self.path + "/"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            path = relative_path(scope)
            if path == self.path or path.startswith(self._under):
                if self.as_path is not None:
                    scope = moved(scope, self.path, self.as_path)
                await self.mounted(scope, receive, send)
                return
        await self.app(scope, receive, send)


def moved(scope: Scope, path: str, to: str) -> Scope:
    """A copy of `scope` whose path starts with `to` where it started with `path`."""
    scope = dict(scope)
    scope.pop(RELATIVE_PATH_KEY, None)
    root = scope.get("root_path", "")
    full: str = scope["path"]
    if full.startswith(root + path):
        scope["path"] = root + to + full[len(root) + len(path) :]
    raw = scope.get("raw_path")
    if raw:
        old, new = (root + path).encode(), (root + to).encode()
        scope["raw_path"] = new + bytes(raw)[len(old) :] if raw.startswith(old) else raw
    return scope
