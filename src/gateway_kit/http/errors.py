"""Finite responses: JSON bodies, JSON errors and empty answers.

Every error body is ``{"error": code, "message": text}``. The codes every part may answer are
the constants below; a part's own codes (``invalid_cursor``, ``run_active``, ...) live beside
its routes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..types import Send

INVALID_BODY = "invalid_body"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
PAYLOAD_TOO_LARGE = "payload_too_large"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
UNAUTHENTICATED = "unauthenticated"
FORBIDDEN = "forbidden"
DATABASE_UNAVAILABLE = "database_unavailable"
PLUGIN_UNAVAILABLE = "plugin_unavailable"
REQUEST_TIMEOUT = "request_timeout"

JSON_TYPE = (b"content-type", b"application/json")
NO_STORE = (b"cache-control", b"no-store")

Headers = Iterable[tuple[bytes, bytes]]


def json_body(document: object) -> bytes:
    """`document` as UTF-8 JSON: non-ASCII as it is, unless a string holds a lone surrogate
    (what an upstream sent, kept as sent), which only escapes can carry."""
    try:
        return json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(document).encode("ascii")


async def send_json(send: Send, status: int, document: object, headers: Headers = ()) -> None:
    """Send `document` as the whole response."""
    body = json_body(document)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                JSON_TYPE,
                NO_STORE,
                (b"content-length", str(len(body)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def send_error(
    send: Send, status: int, code: str, message: str, headers: Headers = ()
) -> None:
    await send_json(send, status, {"error": code, "message": message}, headers)


class HTTPError(Exception):
    """A request the route cannot serve, answered with the JSON error body: raise it from any
    depth of a route, and the router sends it."""

    def __init__(self, status: int, code: str, message: str, headers: Headers = ()) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = list(headers)

    async def send(self, send: Send) -> None:
        await send_error(send, self.status, self.code, self.message, self.headers)


async def send_no_content(send: Send) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": [NO_STORE]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
