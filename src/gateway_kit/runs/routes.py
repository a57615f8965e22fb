"""HTTP routes for runs: start one in a stream, cancel one, read one's state.

``POST {prefix}/streams/{stream}/runs`` with ``{"message": "..."}`` answers ``{"run_id", ...}``
(409 while the stream has an active run); ``POST {prefix}/runs/{run_id}/cancel`` asks goose to
stop it; ``GET {prefix}/runs/{run_id}`` tells its status.
"""

from __future__ import annotations

import json
from typing import Any

from ..exceptions import RunConflict, RunNotFound, UpstreamError, UpstreamUnavailable
from ..streams.errors import send_error, send_json_text
from ..types import Receive, Scope, Send
from .model import Run
from .service import RunService

MAX_BODY_BYTES = 1024 * 1024
INVALID_BODY = "invalid_body"
RUN_ACTIVE = "run_active"
RUN_NOT_FOUND = "run_not_found"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_ERROR = "upstream_error"
NO_UPSTREAM = "no_upstream"
BODY_MESSAGE = 'the body must be a JSON object with a non-empty string "message"'
TOO_LARGE_MESSAGE = f"the body is larger than {MAX_BODY_BYTES} bytes"
NO_UPSTREAM_MESSAGE = "this gateway has no upstream: pass Gateway(upstream=GooseUpstream(...))"


def run_json(run: Run) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "stream": run.stream,
        "status": run.status.value,
        "attempt": run.attempt,
        "cancel_requested": run.cancel_requested,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
    }


async def read_json_body(receive: Receive) -> Any:
    """The request body as JSON; ValueError when too large or not JSON."""
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ValueError("the client left before sending its body")
        body += message.get("body", b"")
        if len(body) > MAX_BODY_BYTES:
            raise ValueError(TOO_LARGE_MESSAGE)
        if not message.get("more_body", False):
            break
    try:
        return json.loads(body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"the body is not JSON: {exc}") from exc


async def _answer(send: Send, status: int, document: dict[str, Any]) -> None:
    await send_json_text(send, status, json.dumps(document, ensure_ascii=False))


class RunRoutes:
    def __init__(self, service: RunService | None) -> None:
        self.service = service

    async def start(self, scope: Scope, receive: Receive, send: Send, stream: str) -> None:
        try:
            body = await read_json_body(receive)
        except ValueError as exc:
            await send_error(send, 400, INVALID_BODY, str(exc))
            return
        message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(message, str) or not message.strip():
            await send_error(send, 400, INVALID_BODY, BODY_MESSAGE)
            return
        if self.service is None:
            await send_error(send, 501, NO_UPSTREAM, NO_UPSTREAM_MESSAGE)
            return
        try:
            run = await self.service.start(stream, message)
        except RunConflict as exc:
            await send_error(send, 409, RUN_ACTIVE, str(exc))
        except UpstreamError as exc:
            await self._upstream_error(send, exc)
        else:
            await _answer(send, 200, run_json(run))

    async def cancel(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        if self.service is None:
            await send_error(send, 501, NO_UPSTREAM, NO_UPSTREAM_MESSAGE)
            return
        try:
            run = await self.service.cancel(run_id)
        except RunNotFound as exc:
            await send_error(send, 404, RUN_NOT_FOUND, str(exc))
        except UpstreamError as exc:
            await self._upstream_error(send, exc)
        else:
            await _answer(send, 200, run_json(run))

    async def show(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        if self.service is None:
            await send_error(send, 404, RUN_NOT_FOUND, f"no run {run_id!r}")
            return
        try:
            run = await self.service.get(run_id)
        except RunNotFound as exc:
            await send_error(send, 404, RUN_NOT_FOUND, str(exc))
        else:
            await _answer(send, 200, run_json(run))

    @staticmethod
    async def _upstream_error(send: Send, exc: UpstreamError) -> None:
        code = UPSTREAM_UNAVAILABLE if isinstance(exc, UpstreamUnavailable) else UPSTREAM_ERROR
        await send_error(send, 502, code, str(exc))
