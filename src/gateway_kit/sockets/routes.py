"""`PresenceRoutes`: who watches a stream, over HTTP.

    GET {prefix}/streams/{stream}/presence   → {"stream", "users": [{"user_id",
                                               "connections"}], "connections": [...]}

Asked like every read: a principal (401) that `authorize_subscription` lets read the stream
(403). The answer is the same from every gateway process. The Socket.IO server is started and
stopped by whoever made it (the gateway's lifespan part), not here.
"""

from __future__ import annotations

import asyncio

from ..hooks import Plugins
from ..http.errors import send_json
from ..http.request import Request
from ..http.routing import Route, Router, RoutesMiddleware, path_stream
from ..settings import DEFAULT_PREFIX
from ..types import ASGIApp
from .server import SocketServer


class PresenceRoutes(RoutesMiddleware):
    """:param sockets: the Socket.IO server whose presence is served.
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
        routes = [Route("/streams/{stream}/presence", self.presence)]
        super().__init__(app, Router(prefix.rstrip("/"), routes))
        self.sockets = sockets
        self.plugins = plugins

    async def presence(self, request: Request) -> None:
        stream = path_stream(request)
        await self.plugins.require_read(request.principal, stream)
        watching = await asyncio.to_thread(self.sockets.presence.watching, stream)
        await send_json(request.send, 200, watching)
