"""`StreamRoutes`: the stream endpoints, as a middleware usable around any ASGI app.

    GET {prefix}/streams/{stream}/events   SSE of a stream (a JSON page with Accept: JSON)
    GET {prefix}/runs/{run_id}/events      SSE of one run; ends after its Finish or Error

Before anything is read, the request is checked: a run's events need a principal (401) before
the run is looked up, so that nobody without credentials tells a real run from one that does not
exist; a stream name the log cannot hold is a 400
``invalid_stream``, a run the log holds no event of is a 404 ``run_not_found`` (every run the
gateway starts has its first event before its id is handed out), a bad cursor or limit a 400,
and `authorize_subscription` decides whether the principal may read the stream (403
``forbidden``; for a run, the same 404 as a run the log lacks, which says nothing of whether it
exists). Every other request passes on to the app below.
"""

from __future__ import annotations

from ..exceptions import InvalidEvent
from ..hooks import Plugins
from ..http.errors import HTTPError
from ..http.lifespan import observe_lifespan
from ..http.request import Request
from ..http.routing import Route, Router, RoutesMiddleware, path_stream
from ..log import EventLog
from ..log.event import check_name
from ..settings import DEFAULT_PREFIX
from ..types import ASGIApp, Receive, Scope, Send
from .request import request_cursor
from .responder import StreamOptions
from .service import StreamService, service_of

RUN_NOT_FOUND = "run_not_found"
NO_SUCH_RUN = "the log holds no event of run {run_id!r}"


class StreamRoutes(RoutesMiddleware):
    """:param plugins: whose `authorize_subscription` decides who reads what.
    :param service: the stream machinery (`StreamService`) shared with the other parts that read
        the log; whoever made it starts and stops it (`gateway_kit.http.lifespan.Lifespan`).
    :param log: instead of `service`, the log the streams are read from: the part then makes a
        service of its own (with `options`) and, since nobody else holds it, watches the
        lifespan for it (its streams end at the shutdown).
    :param prefix: where the routes live.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        plugins: Plugins,
        service: StreamService | None = None,
        log: EventLog | None = None,
        options: StreamOptions | None = None,
        prefix: str = DEFAULT_PREFIX,
    ) -> None:
        routes = [
            Route("/streams/{stream}/events", self.stream_events),
            Route("/runs/{run_id}/events", self.run_events),
        ]
        super().__init__(app, Router(prefix.rstrip("/"), routes))
        self.own_service = service is None
        self.service = service_of(type(self).__name__, service, log, options)
        self.plugins = plugins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" and self.own_service:
            service = self.service
            receive = observe_lifespan(receive, startup=service.startup, shutdown=service.shutdown)
        await super().__call__(scope, receive, send)

    async def stream_events(self, request: Request) -> None:
        stream = path_stream(request)
        cursor = request_cursor(request.scope, request.query, epoch=self.service.log.epoch)
        await self.authorize(request, stream)
        await self.service.serve(request, cursor, stream=stream)

    async def run_events(self, request: Request) -> None:
        principal = request.principal  # a 401 before any look: a run's id is told nobody
        run_id = request.path_params["run_id"]
        cursor = request_cursor(request.scope, request.query, epoch=self.service.log.epoch)
        entry = None
        try:
            check_name("run_id", run_id)
        except InvalidEvent:
            pass  # no run can have that id: a 404 like any unknown run
        else:
            entry = await self.service.run_entry(run_id)
        # A run of a stream the principal may not read is answered as one the log lacks.
        if entry is None or not await self.plugins.authorize_subscription(principal, entry.stream):
            raise HTTPError(404, RUN_NOT_FOUND, NO_SUCH_RUN.format(run_id=run_id))
        await self.service.serve(request, cursor, run=entry, run_id=run_id)

    async def authorize(self, request: Request, stream: str) -> None:
        await self.plugins.require_read(request.principal, stream)
