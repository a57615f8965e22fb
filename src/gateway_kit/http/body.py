"""Reading a request body, refusing before anything is written what cannot be served.

A body must fit in `max_bytes` (413, told by ``Content-Length`` before any byte is read, or
when the bytes run past it) and arrive whole within `timeout` seconds (408, and the connection
is closed: a client that trickles a body, or stops, holds nothing for longer). A JSON body must
also be declared JSON (``Content-Type: application/json`` or a ``+json`` type: 415 otherwise),
and decode as strict JSON: no ``NaN`` or ``Infinity``, nesting within the decoder's recursion
limit (400 ``invalid_body`` otherwise).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ..types import Receive
from .errors import (
    INVALID_BODY,
    PAYLOAD_TOO_LARGE,
    REQUEST_TIMEOUT,
    UNSUPPORTED_MEDIA_TYPE,
    HTTPError,
)
from .request import Request

JSON_MEDIA_TYPE = "application/json"
NOT_JSON_TYPE = "the body must be sent as Content-Type: application/json, got {value!r}"
TOO_LARGE = "the body is larger than {limit} bytes"
BAD_LENGTH = "Content-Length must be a non-negative integer, got {value!r}"
NOT_JSON = "the body is not JSON: {error}"
EMPTY = "the body is empty; send a JSON object"
TOO_DEEP = "the body nests deeper than a JSON document may here"
LEFT = "the client left before sending its body"
TOO_SLOW = "the body did not arrive within {timeout:g} s"
CLOSE = (b"connection", b"close")  # the rest of the body is never read


def is_json_type(content_type: str | None) -> bool:
    if content_type is None:
        return False
    media = content_type.partition(";")[0].strip().lower()
    structured = media.startswith("application/") and media.endswith("+json")
    return media == JSON_MEDIA_TYPE or structured


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


async def read_body(
    receive: Receive, declared: str | None, *, max_bytes: int, timeout: float | None = None
) -> bytes:
    """The whole body (`declared` is its ``Content-Length``); `HTTPError` 400, 408 or 413."""
    if declared is not None:
        text = declared.strip()
        if not (text.isascii() and text.isdigit()):
            raise HTTPError(400, INVALID_BODY, BAD_LENGTH.format(value=declared))
        # Python converts no more than a few thousand digits, zeros in front included.
        significant = text.lstrip("0") or "0"
        if len(significant) > len(str(max_bytes)) or int(significant) > max_bytes:
            raise HTTPError(413, PAYLOAD_TOO_LARGE, TOO_LARGE.format(limit=max_bytes), [CLOSE])
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise HTTPError(400, INVALID_BODY, LEFT)
                body += message.get("body", b"")
                if len(body) > max_bytes:
                    limit = TOO_LARGE.format(limit=max_bytes)
                    raise HTTPError(413, PAYLOAD_TOO_LARGE, limit, [CLOSE])
                if not message.get("more_body", False):
                    return bytes(body)
    except TimeoutError:
        raise HTTPError(408, REQUEST_TIMEOUT, TOO_SLOW.format(timeout=timeout), [CLOSE]) from None


async def read_json_body(request: Request, *, max_bytes: int, timeout: float | None = None) -> Any:
    """The request body decoded as JSON; `HTTPError` 400, 408, 413 or 415 when it cannot be."""
    content_type = request.header(b"content-type")
    if not is_json_type(content_type):
        raise HTTPError(415, UNSUPPORTED_MEDIA_TYPE, NOT_JSON_TYPE.format(value=content_type))
    declared = request.header(b"content-length")
    body = await read_body(request.receive, declared, max_bytes=max_bytes, timeout=timeout)
    if not body.strip():
        raise HTTPError(400, INVALID_BODY, EMPTY)
    try:
        return json.loads(body, parse_constant=_no_constants)
    except RecursionError:
        raise HTTPError(400, INVALID_BODY, TOO_DEEP) from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise HTTPError(400, INVALID_BODY, NOT_JSON.format(error=exc)) from None
