"""One request to a route of the stack, and the helpers that read a scope."""

from __future__ import annotations

from urllib.parse import parse_qsl, unquote_to_bytes

from ..principal import Principal, principal_of
from ..types import Receive, Scope, Send
from .errors import UNAUTHENTICATED, HTTPError

LOGIN_NEEDED = (
    "this needs credentials: a session cookie (log in), an Authorization: Bearer token, "
    "or a host-login token"
)


def header(scope: Scope, name: bytes) -> str | None:
    """The first value of header `name` (lower case), decoded as latin-1 like every header."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return bytes(value).decode("latin-1")
    return None


def query_params(scope: Scope) -> dict[str, str]:
    """The query string as a dict; a repeated parameter keeps its first value."""
    raw = scope.get("query_string", b"")
    params: dict[str, str] = {}
    for key, value in parse_qsl(bytes(raw).decode("latin-1"), keep_blank_values=True):
        params.setdefault(key, value)
    return params


# Where `relative_path` keeps its answer in the scope, with the root path it is relative to
# (a router mounting a part below may change that): every part of the stack asks for it.
RELATIVE_PATH_KEY = "gateway_kit.relative_path"


def relative_path(scope: Scope) -> str:
    """The raw (still percent-encoded) request path below the root path."""
    root = scope.get("root_path", "")
    known = scope.get(RELATIVE_PATH_KEY)
    if known is not None and known[0] == root:
        path: str = known[1]
        return path
    raw = scope.get("raw_path")
    path = bytes(raw).decode("latin-1") if raw else scope["path"]
    path = path.partition("?")[0]  # a server may leave the query on raw_path
    if root and path.startswith(root):
        path = path[len(root) :]
    scope[RELATIVE_PATH_KEY] = (root, path)
    return path


class BadPath(ValueError):
    """A path segment that is not UTF-8 once percent-decoded."""


def decode_segment(raw: str) -> str:
    """One segment of `relative_path`, percent-decoded, as UTF-8; `BadPath` when it is not.

    The raw path keeps the request's bytes one to one (latin-1), so ``é`` sent raw and sent as
    ``%C3%A9`` decode alike, and ``%FF`` is refused instead of becoming U+FFFD.
    """
    try:
        return unquote_to_bytes(raw.encode("latin-1")).decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError) as exc:
        raise BadPath(f"the path segment {raw!r} is not UTF-8") from exc


class Request:
    """What a route's endpoint gets: the ASGI channels, the path parameters, the query."""

    __slots__ = ("_query", "path_params", "receive", "scope", "send")

    def __init__(
        self, scope: Scope, receive: Receive, send: Send, path_params: dict[str, str]
    ) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.path_params = path_params
        self._query: dict[str, str] | None = None

    @property
    def method(self) -> str:
        method: str = self.scope["method"]
        return method

    @property
    def query(self) -> dict[str, str]:
        if self._query is None:
            self._query = query_params(self.scope)
        return self._query

    def header(self, name: bytes) -> str | None:
        return header(self.scope, name)

    @property
    def principal(self) -> Principal:
        """Who is asking, as the identity stage resolved it; a 401 when nobody is (no
        credentials, or no identity stage in front of this part)."""
        principal = principal_of(self.scope)
        if principal is None:
            raise HTTPError(401, UNAUTHENTICATED, LOGIN_NEEDED)
        return principal
