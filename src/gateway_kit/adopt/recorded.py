"""`Recorded`: one request as it was recorded, ready to replay, whatever file it came from.

Headers that belong to one connection or one server are left out when a request is read, so
that both sides get the same request from the replay and not from the recording: HTTP/2's
pseudo-headers (``:authority``, ``:path``...), hop-by-hop headers, ``Host`` (made from the
recorded address), ``Content-Length`` (made from the body) and ``Accept-Encoding`` (so that both
answers come uncompressed: compression is the server's work, and gzip's output holds a time).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..exceptions import GatewayKitError

DEFAULT_SCHEME = "http"
DEFAULT_HOST = "localhost"
NOT_REPLAYED_HEADERS = frozenset(
    {
        "accept-encoding",
        "connection",
        "content-length",
        "host",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
BAD_METHOD = "method {method!r} is not an HTTP method"
BAD_PATH = "path {path!r} does not start with / or holds spaces or control characters"
BAD_HEADER_NAME = "header name {name!r} is not a token"
BAD_HEADER_VALUE = "header {name!r} holds a line break or a control character"
CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
PATH_CONTROL = re.compile(r"[\x00-\x20\x7f]")


class BadRecording(GatewayKitError, ValueError):
    """A recording that cannot be replayed: which line or entry, and why."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """One request: `target` is the path with its query, as sent; `scheme` and `host` are the
    recorded address (``host`` with its port when it has one)."""

    method: str
    target: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""
    scheme: str = DEFAULT_SCHEME
    host: str = DEFAULT_HOST
    source: str = field(default="", compare=False)  # "line 3", "entry 7": for messages

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}{self.target}"


def recorded(
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes,
    *,
    scheme: str = DEFAULT_SCHEME,
    host: str = DEFAULT_HOST,
    source: str,
) -> Recorded:
    """A `Recorded`, checked; `BadRecording` naming `source` when it is not a request."""
    if not TOKEN.fullmatch(method):
        raise BadRecording(f"{source}: {BAD_METHOD.format(method=method)}")
    if not target.startswith("/") or PATH_CONTROL.search(target):
        raise BadRecording(f"{source}: {BAD_PATH.format(path=target)}")
    kept = []
    for name, value in headers:
        if name.startswith(":") or name.lower() in NOT_REPLAYED_HEADERS:
            continue
        if not TOKEN.fullmatch(name):
            raise BadRecording(f"{source}: {BAD_HEADER_NAME.format(name=name)}")
        if CONTROL.search(value):
            raise BadRecording(f"{source}: {BAD_HEADER_VALUE.format(name=name)}")
        kept.append((name, value))
    return Recorded(
        method.upper(), target, tuple(kept), body, scheme=scheme, host=host, source=source
    )


def header(request: Recorded, name: str) -> str | None:
    """The first value of header `name` in `request` (any case), or None."""
    wanted = name.lower()
    return next((value for key, value in request.headers if key.lower() == wanted), None)
