"""`PresenceRoutes`: who watches a stream, over HTTP, and the Socket.IO server's lifespan.

    GET {prefix}/streams/{stream}/presence   → {"stream", "users": [{"user_id",
                                               "connections"}], "connections": [...]}

Asked like every read: a principal (401) that `authorize_subscription` lets read the stream
(403). The answer is the same from every gateway process.
"""

from __future__ import annotations

import asyncio

from ..exceptions import InvalidEvent
from ..hooks import Plugins
from ..http.errors import HTTPError, send_json
from ..http.lifespan import observe_lifespan
from ..http.request import Request, relative_path
from ..http.routing import Route, Router
from ..log.event import check_name
from ..settings import DEFAULT_PREFIX
from ..streams.request import INVALID_STREAM
from ..types import ASGIApp, Receive, Scope, Send
from .server import SocketServer


class PresenceRoutes:
    """:param sockets: the Socket.IO server whose presence is served (and stopped with the
        lifespan's shutdown).
    :param plugins: whose `authorize_subscription` decides who may look.
    :param prefix: where the route lives.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        sockets: SocketServer,
        plugins: Plugins,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        self.app = app
        self.sockets = sockets
        self.plugins = plugins
        self.router = Router(
            prefix.rstrip("/"), [Route("/streams/{stream}/presence", self.presence)]
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.router.owns(relative_path(scope)):
            if await self.router.handle(scope, receive, send):
                return
        elif scope["type"] == "lifespan":
            receive = observe_lifespan(
                receive, startup=self.sockets.startup, shutdown=self.sockets.shutdown
            )
        await self.app(scope, receive, send)

    async def presence(self, request: Request) -> None:
        stream = request.path_params["stream"]
        principal = request.principal
        try:
            check_name("stream", stream)
        except InvalidEvent as exc:
            raise HTTPError(400, INVALID_STREAM, str(exc)) from None
        await self.plugins.require_read(principal, stream)
        watching = await asyncio.to_thread(self.sockets.presence.watching, stream)
        await send_json(request.send, 200, watching)
