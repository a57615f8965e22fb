"""The routes of one part of the stack, matched on the raw request path.

Deliberate divergence from Starlette's `Router`: Starlette matches the percent-decoded path, so a
stream name holding an encoded ``/`` (``a%2Fb``) could never be one path parameter. Here the raw
path is split on ``/`` first and each segment decoded alone; a parameter is one non-empty
segment. A path that a route names but with another method is a 405 with ``Allow``; a path under
the prefix that no route names is passed on (the stack's last part under the prefix answers the
JSON 404), so that several parts can share one prefix.

`RoutesMiddleware` is the skeleton of every part that serves routes of its own: it serves what
its router names and passes everything else, lifespan messages included, to the app below.
`path_stream` is the one refusal of a stream name taken from a path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..exceptions import InvalidEvent
from ..log.event import check_name
from ..types import ASGIApp, Receive, Scope, Send
from .errors import METHOD_NOT_ALLOWED, HTTPError, send_error
from .request import BadPath, Request, decode_segment, relative_path

Endpoint = Callable[[Request], Awaitable[None]]

INVALID_PATH = "invalid_path"
INVALID_STREAM = "invalid_stream"
BAD_STREAM = "{error}: no stream can have that name"
METHOD_NOT_ALLOWED_MESSAGE = "{method} is not allowed here; use {allowed}"
BAD_TEMPLATE = "a route path is '/' and segments, each a word or a {{parameter}}; got {path!r}"


@dataclass(frozen=True, slots=True)
class Route:
    """`path` (below the router's prefix, e.g. ``/streams/{stream}/events``) served by
    `endpoint` for `methods`."""

    path: str
    endpoint: Endpoint
    methods: tuple[str, ...] = ("GET",)
    # Per segment: the literal it must equal, or None for a parameter of that name.
    segments: tuple[tuple[str | None, str | None], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        parts = self.path.split("/")
        if parts[0] != "" or len(parts) < 2 or not all(parts[1:]):
            raise ValueError(BAD_TEMPLATE.format(path=self.path))
        segments: list[tuple[str | None, str | None]] = []
        for part in parts[1:]:
            if part.startswith("{") and part.endswith("}") and part[1:-1].isidentifier():
                segments.append((None, part[1:-1]))
            elif "{" in part or "}" in part:
                raise ValueError(BAD_TEMPLATE.format(path=self.path))
            else:
                segments.append((part, None))
        object.__setattr__(self, "segments", tuple(segments))
        object.__setattr__(self, "methods", tuple(m.upper() for m in self.methods))

    def match(self, raw: list[str]) -> dict[str, str] | None:
        """The path parameters when the raw segments fit this route, else None; `BadPath`
        when they fit but a parameter is not UTF-8."""
        if len(raw) != len(self.segments):
            return None
        params: dict[str, str] = {}
        for part, (literal, name) in zip(raw, self.segments, strict=True):
            if literal is not None:
                if part != literal:
                    return None
            elif not part:
                return None
            else:
                params[name] = decode_segment(part)  # type: ignore[index]
        return params


class Router:
    """Serves the requests under `prefix` that one of `routes` names."""

    def __init__(self, prefix: str, routes: Sequence[Route]) -> None:
        self.prefix = prefix
        self.routes = tuple(routes)
        self._under = prefix + "/"

    def owns(self, path: str) -> bool:
        return path.startswith(self._under)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve an HTTP request one of the routes names; False (nothing sent) for any other."""
        path = relative_path(scope)
        if not path.startswith(self._under):
            return False
        raw = path[len(self.prefix) :].split("/")[1:]
        method = scope["method"]
        allowed: list[str] = []
        for route in self.routes:
            try:
                params = route.match(raw)
            except BadPath as exc:
                await send_error(send, 400, INVALID_PATH, str(exc))
                return True
            if params is None:
                continue
            if method not in route.methods:
                allowed.extend(route.methods)
                continue
            try:
                await route.endpoint(Request(scope, receive, send, params))
            except HTTPError as error:
                await error.send(send)
            return True
        if not allowed:
            return False
        allow = ", ".join(sorted(set(allowed)))
        message = METHOD_NOT_ALLOWED_MESSAGE.format(method=method, allowed=allow)
        await send_error(send, 405, METHOD_NOT_ALLOWED, message, [(b"allow", allow.encode())])
        return True


class RoutesMiddleware:
    """A part of the stack that serves the HTTP requests its `router` names and passes every
    other request, and every lifespan message, on to `app` untouched.

    `legacy` is one more route, ``(path, endpoint)``, at a path of the legacy app's own outside
    the prefix (``/api/socket-token``), kept for its old clients. A part whose routes are
    placed otherwise overrides `serve`."""

    def __init__(
        self, app: ASGIApp, router: Router, *, legacy: tuple[str, Endpoint] | None = None
    ) -> None:
        self.app = app
        self.router = router
        self.legacy_path = legacy[0] if legacy else None
        self.legacy = Router("", [Route(*legacy)]) if legacy else None

    async def serve(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve an HTTP request that is this part's own; False (nothing sent) for any other."""
        router = self.router
        path = relative_path(scope)
        if router.owns(path) and await router.handle(scope, receive, send):
            return True
        # Every request of the app passes here: only the one legacy path is looked at further.
        legacy = self.legacy
        return (
            legacy is not None
            and path == self.legacy_path
            and await legacy.handle(scope, receive, send)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await self.serve(scope, receive, send):
            return
        await self.app(scope, receive, send)


def unfit_stream(stream: str) -> str | None:
    """Why no stream can have the name `stream` (the log would refuse it), or None."""
    try:
        check_name("stream", stream)
    except InvalidEvent as exc:
        return BAD_STREAM.format(error=exc)
    return None


def path_stream(request: Request, name: str = "stream") -> str:
    """The stream named by the path parameter `name`; a 400 ``invalid_stream`` when no stream
    can have that name, before anything is asked or read."""
    stream = request.path_params[name]
    unfit = unfit_stream(stream)
    if unfit is not None:
        raise HTTPError(400, INVALID_STREAM, unfit)
    return stream
