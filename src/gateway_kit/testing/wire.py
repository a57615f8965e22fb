"""goosed's HTTP surface: its routes, its error messages, and answering in its shapes."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from gateway_kit.types import JSONObject, Receive, Send

SECRET_HEADER = "x-secret-key"
UNAUTHORIZED = "Unauthorized"
INVALID_REQUEST_ID = "request_id must be a valid UUID"
SESSION_BUSY = "Session already has an active request. Cancel it first."
SESSION_NOT_FOUND = "Session {} not found"
NOT_FOUND = "Not found"
METHOD_NOT_ALLOWED = "Method not allowed"
BAD_JSON = "Failed to parse the request body as JSON"
BAD_BODY = "Failed to deserialize the JSON body into the target type: {}"

# What Rust's uuid::Uuid::parse_str accepts: simple, hyphenated, braced and URN forms.
_HEX = "[0-9a-fA-F]"
_HYPHENATED = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
GOOSE_UUID = re.compile(rf"{_HEX}{{32}}|{_HYPHENATED}|\{{{_HYPHENATED}\}}|urn:uuid:{_HYPHENATED}")


ROUTES = [
    (re.compile(r"/status"), "GET", "status"),
    (re.compile(r"/agent/start"), "POST", "start"),
    (re.compile(r"/agent/resume"), "POST", "resume"),
    (re.compile(r"/agent/tools"), "GET", "tools"),
    (re.compile(r"/action-required/tool-confirmation"), "POST", "confirm"),
    (re.compile(r"/sessions/([^/]+)/extensions"), "GET", "extensions"),
    (re.compile(r"/sessions/([^/]+)/reply"), "POST", "reply"),
    (re.compile(r"/sessions/([^/]+)/cancel"), "POST", "cancel"),
    (re.compile(r"/sessions/([^/]+)/events"), "GET", "events"),
    (re.compile(r"/sessions/([^/]+)"), "GET", "session"),
]


class Reject(Exception):
    """Answer the request with this status and `{"message": ...}` (and these headers)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def json_object(body: bytes) -> JSONObject:
    try:
        value = json.loads(body)
    except ValueError as error:
        raise Reject(400, f"{BAD_JSON}: {error}") from error
    if not isinstance(value, dict):
        raise Reject(422, BAD_BODY.format("expected a JSON object"))
    return value


def require(body: JSONObject, name: str, kind: type) -> Any:
    value = body.get(name)
    if not isinstance(value, kind):
        raise Reject(422, BAD_BODY.format(f"`{name}` must be a {kind.__name__}"))
    return value


async def answer(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: dict[str, str] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in (extra or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def answer_json(
    send: Send, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    await answer(send, status, json.dumps(payload).encode(), b"application/json", headers)


def match_route(method: str, path: str) -> tuple[str, str]:
    """The route's name and the session id in its path ("" if none); 404 or 405 otherwise."""
    for pattern, allowed, name in ROUTES:
        match = pattern.fullmatch(path)
        if match is None:
            continue
        if method != allowed:
            raise Reject(405, METHOD_NOT_ALLOWED)
        return name, match.group(1) if match.groups() else ""
    raise Reject(404, NOT_FOUND)


async def read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def serve_lifespan(receive: Receive, send: Send, *, on_shutdown: Callable[[], None]) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            on_shutdown()
            await send({"type": "lifespan.shutdown.complete"})
            return
