"""Finite responses: JSON bodies, JSON errors and empty answers.

Every error body is ``{"error": code, "message": text}``; the codes are the constants below.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from ..types import Send

INVALID_CURSOR = "invalid_cursor"
INVALID_LIMIT = "invalid_limit"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
SHUTTING_DOWN = "shutting_down"
LOG_UNAVAILABLE = "log_unavailable"

JSON_TYPE = (b"content-type", b"application/json")
NO_STORE = (b"cache-control", b"no-store")

Headers = Iterable[tuple[bytes, bytes]]


async def send_json_text(send: Send, status: int, text: str, headers: Headers = ()) -> None:
    """Send an already encoded JSON document as the whole response."""
    body = text.encode("utf-8")
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
    text = json.dumps({"error": code, "message": message}, ensure_ascii=False)
    await send_json_text(send, status, text, headers)


async def send_no_content(send: Send) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": [NO_STORE]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
