"""`Gateway`: the ASGI application that serves the event log and wraps the legacy app.

Requests under the prefix are the gateway's own; ``GET /api/tasks/<task_id>`` is answered from
the log when the log knows that task; everything else goes to the wrapped app. A WSGI app
(Flask) runs behind `a2wsgi` in a pool of `wsgi_workers` threads, and serves short requests
only: every long-lived response is served here, in the event loop, from the log.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence

from a2wsgi import WSGIMiddleware

from .log import EventLog
from .runs.routes import RunRoutes
from .runs.service import RunService
from .runs.store import RunStore
from .streams import StreamOptions, StreamService
from .streams.errors import METHOD_NOT_ALLOWED, NOT_FOUND, send_error
from .streams.request import path_segments
from .streams.responder import DEFAULT_PING_INTERVAL, DEFAULT_QUEUE_SIZE, DEFAULT_SEND_TIMEOUT
from .types import ASGIApp, Message, Receive, Scope, Send
from .upstream.goose import GooseUpstream
from .upstream.pump import PumpSettings
from .upstream.pumps import SCAN_INTERVAL, PumpManager

logger = logging.getLogger("gateway_kit")

DEFAULT_PREFIX = "/gateway"
DEFAULT_WSGI_WORKERS = 10
LEGACY_TASKS_PATH = "/api/tasks"
ANONYMOUS_WARNING = (
    "allow_anonymous=True: requests without credentials are served as 'anonymous', allowed "
    "everything. Use this for demos and tests only."
)
NOT_FOUND_MESSAGE = "no such gateway endpoint: {path}"
METHOD_NOT_ALLOWED_MESSAGE = "{method} is not allowed here; use {allowed}"
BAD_PREFIX = "prefix must start with '/' and name a path, such as '/gateway'; got {prefix!r}"
UNKNOWN_APP_KIND = (
    "cannot tell whether {app!r} is a WSGI or an ASGI application; pass wsgi=True or wsgi=False"
)

# {prefix}/<collection>/<name>/<action>: (method, handler owner, handler name).
ROUTES = {
    ("streams", "events"): ("GET", "streams", "stream_events"),
    ("runs", "events"): ("GET", "streams", "run_events"),
    ("streams", "runs"): ("POST", "runs", "start"),
    ("runs", "cancel"): ("POST", "runs", "cancel"),
    ("runs", None): ("GET", "runs", "show"),
}


class Gateway:
    """The ASGI application: stream serving under `prefix`, the wrapped app everywhere else.

    :param app: the application to wrap: WSGI (a Flask app, mounted through `a2wsgi`) or ASGI;
        None serves only the gateway's own routes.
    :param log: the `EventLog` every stream is read from.
    :param upstream: the `GooseUpstream` runs go to; without one, starting a run is a 501.
    :param plugins: plugin modules or objects (stored; used by the hooks).
    :param prefix: where the gateway's own routes live.
    :param allow_anonymous: serve requests without credentials as ``anonymous``. Until identity
        exists every request is served anonymously; True also logs a warning at start-up.
    :param wsgi: whether `app` is WSGI; None guesses (a Flask app, an ``async def __call__``,
        the number of parameters) and raises `TypeError` when it cannot tell.
    :param wsgi_workers: threads serving the WSGI app; each request holds one while it runs.
    :param ping_interval: seconds between ``: ping`` comments on an SSE stream.
    :param send_timeout: seconds one write to a client may take before it is disconnected
        (noticed within a quarter of that again).
    :param queue_size: live events one SSE client may have waiting before it is disconnected
        (it then resumes by cursor; the others never wait for it).
    :param legacy_tasks_path: where the legacy task poll lives; None leaves it to the app.
    :param pump_settings: timings of the session pumps (`gateway_kit.upstream.pump`).
    :param pump_scan_interval: how often this process looks for sessions nobody pumps (their
        process died) and takes them over.
    :param working_dir: the working directory of the goose sessions this gateway starts.
    """

    def __init__(
        self,
        app: object | None = None,
        *,
        log: EventLog,
        upstream: GooseUpstream | None = None,
        plugins: Sequence[object] = (),
        prefix: str = DEFAULT_PREFIX,
        allow_anonymous: bool = False,
        wsgi: bool | None = None,
        wsgi_workers: int = DEFAULT_WSGI_WORKERS,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        legacy_tasks_path: str | None = LEGACY_TASKS_PATH,
        pump_settings: PumpSettings | None = None,
        pump_scan_interval: float = SCAN_INTERVAL,
        working_dir: str = ".",
    ) -> None:
        prefix = prefix.rstrip("/")
        if not prefix.startswith("/"):
            raise ValueError(BAD_PREFIX.format(prefix=prefix))
        self.log = log
        self.upstream = upstream
        self.plugins = tuple(plugins)
        self.prefix = prefix
        self.allow_anonymous = allow_anonymous
        self.legacy_tasks_path = legacy_tasks_path.rstrip("/") if legacy_tasks_path else None
        self.wsgi = False if app is None else (is_wsgi(app) if wsgi is None else wsgi)
        self.app: ASGIApp | None = None
        if app is not None:
            self.app = WSGIMiddleware(app, workers=wsgi_workers) if self.wsgi else app  # type: ignore[arg-type,assignment]
        self.streams = StreamService(
            log,
            StreamOptions(
                ping_interval=ping_interval, send_timeout=send_timeout, queue_size=queue_size
            ),
        )
        self.pumps: PumpManager | None = None
        service: RunService | None = None
        if upstream is not None:
            store = RunStore(log.engine)
            self.pumps = PumpManager(
                log=log,
                store=store,
                upstream=upstream,
                settings=pump_settings,
                scan_interval=pump_scan_interval,
            )
            service = RunService(
                log=log, store=store, upstream=upstream, pumps=self.pumps, working_dir=working_dir
            )
        self.runs = RunRoutes(service)
        self._prefix_slash = prefix + "/"
        self._legacy_slash = self.legacy_tasks_path + "/" if self.legacy_tasks_path else None
        if allow_anonymous:
            logger.warning(ANONYMOUS_WARNING)

    def close_streams(self) -> None:
        """End every open stream now (clients resume by cursor) and refuse new ones until the
        next lifespan start-up. Safe from any thread; the lifespan shutdown calls it too."""
        self.streams.close_streams()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = _relative_path(scope)
            if path.startswith(self._prefix_slash) or path == self.prefix:
                await self._own_route(scope, receive, send)
                return
            legacy = self._legacy_slash is not None and path.startswith(self._legacy_slash)
            if legacy and await self._legacy_poll(scope, send):
                return
        elif kind == "lifespan":
            await self._lifespan(scope, receive, send)
            return
        await self._wrapped(scope, receive, send)

    async def _own_route(self, scope: Scope, receive: Receive, send: Send) -> None:
        segments = path_segments(scope)[self.prefix.count("/") :]
        route = None
        if len(segments) in (2, 3) and segments[1]:
            action = segments[2] if len(segments) == 3 else None
            route = ROUTES.get((segments[0], action))
        if route is None:
            await send_error(send, 404, NOT_FOUND, NOT_FOUND_MESSAGE.format(path=scope["path"]))
            return
        method, owner, handler = route
        if scope["method"] != method:
            await send_error(
                send,
                405,
                METHOD_NOT_ALLOWED,
                METHOD_NOT_ALLOWED_MESSAGE.format(method=scope["method"], allowed=method),
                [(b"allow", method.encode())],
            )
            return
        if self.pumps is not None:
            await self.pumps.start()  # also without a lifespan: adopt orphaned sessions
        await getattr(getattr(self, owner), handler)(scope, receive, send, segments[1])

    async def _legacy_poll(self, scope: Scope, send: Send) -> bool:
        assert self.legacy_tasks_path is not None
        segments = path_segments(scope)[self.legacy_tasks_path.count("/") :]
        if scope["method"] != "GET" or len(segments) != 1 or not segments[0]:
            return False
        return await self.streams.legacy_poll(scope, send, segments[0])

    async def _wrapped(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await send_error(send, 404, NOT_FOUND, NOT_FOUND_MESSAGE.format(path=scope["path"]))
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1000})

    async def _lifespan(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def observed_receive() -> Message:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self.streams.reopen()
                if self.pumps is not None:
                    await self.pumps.start()
            elif message["type"] == "lifespan.shutdown":
                self.streams.close_streams()
                if self.pumps is not None:
                    await self.pumps.stop()
            return message

        if self.app is not None and not self.wsgi:
            await self.app(scope, observed_receive, send)
            return
        while True:
            message = await observed_receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return


def is_wsgi(app: object) -> bool:
    """Guess whether `app` is a WSGI application (True) or an ASGI one (False)."""
    if hasattr(app, "wsgi_app"):  # Flask, and apps built the same way
        return True
    call = app if inspect.isfunction(app) or inspect.ismethod(app) else type(app).__call__
    if inspect.iscoroutinefunction(call):
        return False
    try:
        params = inspect.signature(app).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        params = None
    if params is not None and len(params) in (2, 3):
        return len(params) == 2
    raise TypeError(UNKNOWN_APP_KIND.format(app=app))


def _relative_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        return path[len(root) :]
    return path
