"""`RunRoutes`: the run API, as a middleware usable around any ASGI app.

    POST {prefix}/streams/{stream}/runs   {"message": "...", "tmux_session"?: "..."}
                                          → {"run_id", ...}; 409 while the stream has an
                                          active run; 429 (``Retry-After``) while the user
                                          has `max_active_runs_per_user` active runs
    POST {prefix}/runs/{run_id}/cancel    ask goose to stop the run
    GET  {prefix}/runs/{run_id}           the run: its status, its attempts (each with its
                                          goose request id), the seq of its terminal event and
                                          `guard_failed` (its guards gave up on it)

Every route needs a principal (401). A stream, and its runs, are used by whom
`authorize_subscription` lets read it; the others get a 403 for the stream, and for a run the
404 a run that does not exist gets (the same body), so that the answer says nothing of which
runs exist. One exception: a stream that holds no event and has no owner is taken by the
principal who starts its first run (made its owner in the transaction that records the run),
when `authorize_subscription` lets it, asked with ``action="claim"``. A stream with events and
no owner is never taken that way: its history was written for someone.

A request that cannot be served is refused before anything is written: a body that is not JSON
(415 without a JSON content type, 413 above the size limit, 400 otherwise), a message that is not
a non-empty string (400) or is larger than `max_message_bytes` (413), or a stream name or
message the log cannot hold (400, or 413 when the message is too large for one event), a
``tmux_session`` that no tmux session can have (400), a user with as many active runs as one
may have (429 ``too_many_runs``, with ``Retry-After``; `LifecycleSettings`). A goose that
hands out a session id the gateway still uses for another stream's active run (its sessions
were reset) is a 502 ``upstream_error``, and nothing is written.

A run started for a tmux session (the body's ``tmux_session``, else the `resolve_tmux_session`
hook's answer about the request) binds its stream to that session: the stream's active runs
keep heartbeats away from the session's pane (`gateway_kit.execution`). Only the user who
holds the session binds it (a free one is taken by the run's starter): a body naming a session
another user holds is a 403 and starts nothing; a session the hook found that way is left
unbound, and the run starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from ..bindings.names import tmux_session_problem
from ..bindings.tmux_sessions import bindings_of
from ..exceptions import (
    InvalidCredential,
    InvalidEvent,
    PayloadTooLarge,
    RunConflict,
    RunNotFound,
    TmuxSessionTaken,
    UpstreamError,
    UpstreamTimeout,
    UpstreamUnavailable,
)
from ..hooks import Plugins
from ..hooks.hookspecs import CLAIM, READ
from ..http.body import read_json_body
from ..http.errors import INVALID_BODY, PAYLOAD_TOO_LARGE, HTTPError, send_json
from ..http.request import Request
from ..http.routing import Route, Router, RoutesMiddleware
from ..identity.owners import StreamOwners
from ..identity.tokens import check_user_id
from ..settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_PREFIX,
)
from ..types import ASGIApp
from .model import Attempt, Run
from .service import NO_RUN, RunService
from .store import TooManyActiveRuns
from .vetoes import GUARD_FAILED_FLAG

logger = logging.getLogger(__name__)

RUN_ACTIVE = "run_active"
TOO_MANY_RUNS = "too_many_runs"
# Seconds a client refused for having too many active runs waits before it asks again: one of
# its runs may have ended by then.
RETRY_AFTER_SECONDS = 5
RETRY_AFTER = (b"retry-after", str(RETRY_AFTER_SECONDS).encode("ascii"))
RUN_NOT_FOUND = "run_not_found"
INVALID_RUN = "invalid_run"
UPSTREAM_UNAVAILABLE = "upstream_unavailable"
UPSTREAM_ERROR = "upstream_error"
UPSTREAM_TIMEOUT = "upstream_timeout"
NO_UPSTREAM = "no_upstream"
INVALID_USER = "invalid_user"
TMUX_SESSION_TAKEN = "tmux_session_taken"
NOT_BOUND = "stream %r is not bound to tmux session %r, which its request named: %s"
NOT_AN_OWNER = "{error}: this user cannot own a stream, and may not use this one"
BODY_MESSAGE = 'the body must be a JSON object with a non-empty string "message"'
MESSAGE_TOO_LARGE = "the message is larger than {limit} bytes (UTF-8)"
NO_UPSTREAM_MESSAGE = "this gateway has no upstream: pass Gateway(upstream=GooseUpstream(...))"


def run_json(
    run: Run,
    attempts: Sequence[Attempt] = (),
    terminal_seq: int | None = None,
    guard_failed: bool = False,
) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "stream": run.stream,
        "status": run.status.value,
        "attempt": run.attempt,
        "attempts": [attempt_json(attempt) for attempt in attempts],
        "terminal_seq": terminal_seq,
        "guard_failed": guard_failed,
        "cancel_requested": run.cancel_requested,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
    }


def attempt_json(attempt: Attempt) -> dict[str, Any]:
    return {
        "number": attempt.number,
        "kind": attempt.kind.value,
        "upstream_request_id": attempt.upstream_request_id,
        "session_id": attempt.session_id,
        "recovery": attempt.recovery,
        "recovery_try": attempt.recovery_try,
        "reason": attempt.reason,
        "started_at": attempt.started_at,
    }


class RunRoutes(RoutesMiddleware):
    """:param service: what starts and cancels runs; None answers 501 (no upstream). Its pumps
        and lifecycle are started and stopped by whoever made it
        (`gateway_kit.http.lifespan.Lifespan`), not here.
    :param plugins: whose `authorize_subscription` decides who uses a stream's runs.
    :param prefix: where the routes live.
    :param max_body_bytes: the largest request body accepted (413 above it).
    :param max_message_bytes: the largest message a run starts with, UTF-8 (413 above it).
    :param body_timeout: seconds a client may take to send its body (408 after it).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        service: RunService | None,
        plugins: Plugins,
        prefix: str = DEFAULT_PREFIX,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
    ) -> None:
        routes = [
            Route("/streams/{stream}/runs", self.start, methods=("POST",)),
            Route("/runs/{run_id}/cancel", self.cancel, methods=("POST",)),
            Route("/runs/{run_id}", self.show),
        ]
        super().__init__(app, Router(prefix.rstrip("/"), routes))
        self.service = service
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout
        self.max_message_bytes = max_message_bytes
        self.plugins = plugins
        self.owners = StreamOwners(service.log) if service is not None else None

    def _service(self) -> RunService:
        if self.service is None:
            raise HTTPError(501, NO_UPSTREAM, NO_UPSTREAM_MESSAGE)
        return self.service

    async def authorize(self, request: Request, stream: str, action: str = READ) -> None:
        await self.plugins.require_read(request.principal, stream, action)

    async def authorize_run(self, request: Request, run_id: str, stream: str) -> None:
        """A run of a stream the principal may not use is answered as one that does not exist."""
        if not await self.plugins.authorize_subscription(request.principal, stream):
            raise HTTPError(404, RUN_NOT_FOUND, NO_RUN.format(run_id=run_id))

    async def start(self, request: Request) -> None:
        principal = request.principal
        body = await read_json_body(
            request, max_bytes=self.max_body_bytes, timeout=self.body_timeout
        )
        message = body.get("message") if isinstance(body, dict) else None
        if not isinstance(message, str) or not message.strip():
            raise HTTPError(400, INVALID_BODY, BODY_MESSAGE)
        if message_bytes(message) > self.max_message_bytes:
            limit = self.max_message_bytes
            raise HTTPError(413, PAYLOAD_TOO_LARGE, MESSAGE_TOO_LARGE.format(limit=limit))
        tmux_session = body.get("tmux_session")
        asked_for = tmux_session is not None
        if tmux_session is None:
            tmux_session = self.plugins.resolve_tmux_session(request.scope)
        else:
            problem = tmux_session_problem(tmux_session)
            if problem is not None:
                raise HTTPError(400, INVALID_BODY, problem)
        service = self._service()
        owners = self.owners

        async def admit(stream: str) -> str | None:
            owner = await authorized(stream)
            if tmux_session is not None:  # only once the principal may use the stream
                bind = bindings_of(service.log).bind
                try:
                    await asyncio.to_thread(bind, stream, tmux_session, principal.user_id)
                except TmuxSessionTaken as exc:
                    if asked_for:
                        raise HTTPError(403, TMUX_SESSION_TAKEN, str(exc)) from None
                    logger.info(NOT_BOUND, stream, tmux_session, exc)
            return owner

        async def authorized(stream: str) -> str | None:
            """The user the run makes the stream's owner (None: none), or a 403."""
            unfit: InvalidCredential | None = None
            if (
                owners is not None
                and not principal.anonymous
                and await asyncio.to_thread(owners.claimable, stream)
            ):
                try:
                    user = check_user_id(principal.user_id)
                except InvalidCredential as exc:
                    unfit = exc  # an id the owners table cannot hold: only if let in
                else:
                    # Asked as its owner-to-be: a deployment's plugin may still refuse.
                    await self.authorize(request, stream, CLAIM)
                    return user
            if unfit is None:
                await self.authorize(request, stream)
            elif not await self.plugins.authorize_subscription(principal, stream):
                raise HTTPError(403, INVALID_USER, NOT_AN_OWNER.format(error=unfit))
            return None

        try:
            run = await service.start(
                request.path_params["stream"], message, admit=admit, user=principal.user_id
            )
        except TooManyActiveRuns as exc:
            raise HTTPError(429, TOO_MANY_RUNS, str(exc), [RETRY_AFTER]) from None
        except PayloadTooLarge as exc:
            raise HTTPError(413, PAYLOAD_TOO_LARGE, str(exc)) from None
        except InvalidEvent as exc:
            raise HTTPError(400, INVALID_RUN, str(exc)) from None
        except RunConflict as exc:
            raise HTTPError(409, RUN_ACTIVE, str(exc)) from None
        except UpstreamError as exc:
            raise upstream_error(exc) from None
        await send_json(request.send, 200, run_json(run))

    async def cancel(self, request: Request) -> None:
        request.principal  # noqa: B018 - a 401 before anything else
        service = self._service()
        run_id = request.path_params["run_id"]
        try:
            run = await service.cancel(
                run_id, admit=lambda stream: self.authorize_run(request, run_id, stream)
            )
        except RunNotFound as exc:
            raise HTTPError(404, RUN_NOT_FOUND, str(exc)) from None
        except UpstreamError as exc:
            raise upstream_error(exc) from None
        # The run as `GET {prefix}/runs/{run_id}` shows it, whether this cancel stopped it or
        # found it already ended.
        await send_json(request.send, 200, await self.shown(run))

    async def show(self, request: Request) -> None:
        request.principal  # noqa: B018 - a 401 before anything else
        run_id = request.path_params["run_id"]
        if self.service is None:
            raise HTTPError(404, RUN_NOT_FOUND, NO_RUN.format(run_id=run_id))
        try:
            run = await self.service.get(run_id)
        except RunNotFound as exc:
            raise HTTPError(404, RUN_NOT_FOUND, str(exc)) from None
        await self.authorize_run(request, run_id, run.stream)
        await send_json(request.send, 200, await self.shown(run))

    async def shown(self, run: Run) -> dict[str, Any]:
        """The run's JSON with its attempts, the seq of its terminal event and whether its
        guards gave up (its `Finish` says so)."""
        service = self._service()
        attempts = await service.attempts(run.run_id)
        end = await service.log.arun_end(run.run_id)
        if end is None:
            return run_json(run, attempts)
        return run_json(run, attempts, end.seq, end.data.get(GUARD_FAILED_FLAG) is True)


def message_bytes(message: str) -> int:
    # A lone surrogate (which the log refuses later, with a 400) is measured as UTF-8 would be.
    return len(message) if message.isascii() else len(message.encode("utf-8", "surrogatepass"))


def upstream_error(exc: UpstreamError) -> HTTPError:
    if isinstance(exc, UpstreamTimeout):
        return HTTPError(504, UPSTREAM_TIMEOUT, str(exc))
    code = UPSTREAM_UNAVAILABLE if isinstance(exc, UpstreamUnavailable) else UPSTREAM_ERROR
    return HTTPError(502, code, str(exc))
