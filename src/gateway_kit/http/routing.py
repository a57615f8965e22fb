"""The routes of one part of the stack, matched on the raw request path.

Deliberate divergence from Starlette's `Router`: Starlette matches the percent-decoded path, so a
stream name holding an encoded ``/`` (``a%2Fb``) could never be one path parameter. Here the raw
path is split on ``/`` first and each segment decoded alone; a parameter is one non-empty
segment. A path that a route names but with another method is a 405 with ``Allow``; a path under
the prefix that no route names is passed on (the stack's last part under the prefix answers the
JSON 404), so that several parts can share one prefix.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..types import Receive, Scope, Send
from .errors import METHOD_NOT_ALLOWED, HTTPError, send_error
from .request import BadPath, Request, decode_segment, relative_path

Endpoint = Callable[[Request], Awaitable[None]]

INVALID_PATH = "invalid_path"
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
