"""`HeartbeatRoutes`: heartbeat decisions over HTTP.

    GET {prefix}/heartbeat/{tmux_session_id}
        → {"tmux_session_id", "state", "decision": "allow"|"skip", "reason", "detail",
           "decided_by", "decided_at", "evidence": {...the state's fields, "bound_streams",
           "active_runs", "pending_approvals", "pane"}}
    GET {prefix}/heartbeat/{tmux_session_id}/decisions[?limit=N]
        → {"tmux_session_id", "decisions": [...the same documents, with "since" and
           "repeats", newest first]}

Each GET of the first is a decision, recorded like every other (a scheduler asks it right
before it would type); the second lists what was decided and why. Both need a principal (401,
before anything is looked up), and a session it may read: the one it holds, one bound to a
stream it may read (`authorize_subscription`), or any for an operator (the ``operator``
scope). Any other session, held by someone else or by nobody, is answered 404 alike, before the
pane is read: nobody learns which sessions exist, or what another user's agent shows. An id no
tmux session can have is a 400, a bad limit too.
"""

from __future__ import annotations

import asyncio

from ..bindings.claims import claims_of
from ..bindings.names import tmux_session_problem
from ..bindings.tmux_sessions import bindings_of
from ..hooks import Plugins
from ..http.errors import HTTPError, send_json
from ..http.request import Request
from ..http.routing import Route, Router, RoutesMiddleware
from ..principal import Principal
from ..settings import DEFAULT_PREFIX
from ..types import ASGIApp
from .decider import HeartbeatDecider
from .decision_log import MAX_LISTED

INVALID_TMUX_SESSION = "invalid_tmux_session"
INVALID_LIMIT = "invalid_limit"
TMUX_SESSION_NOT_FOUND = "tmux_session_not_found"
BAD_LIMIT = "limit must be an integer from 1 to {max}, got {value!r}"
NOT_FOUND = "no tmux session {tmux_session!r} that you may read"
# Of a session's bound streams, the most asked about (each is a plugin call).
MAX_STREAMS_ASKED = 20


def path_tmux_session(request: Request) -> str:
    """The tmux session the path names; a 401 without a principal first, then a 400 for an id
    no tmux session can have."""
    request.principal  # noqa: B018
    tmux_session = request.path_params["tmux_session_id"]
    problem = tmux_session_problem(tmux_session)
    if problem is not None:
        raise HTTPError(400, INVALID_TMUX_SESSION, problem)
    return tmux_session


def query_limit(request: Request, default: int = 50) -> int:
    value = request.query.get("limit")
    if value is None:
        return default
    # Its length first: Python refuses to read an integer of thousands of digits.
    if not (value.isdigit() and len(value) <= 6) or not 1 <= int(value) <= MAX_LISTED:
        raise HTTPError(400, INVALID_LIMIT, BAD_LIMIT.format(max=MAX_LISTED, value=value[:40]))
    return int(value)


class HeartbeatRoutes(RoutesMiddleware):
    """:param decider: who decides (the gateway's `HeartbeatDecider`); its plugins say who may
        read a bound stream.
    :param prefix: where ``/heartbeat`` lives.
    """

    def __init__(
        self, app: ASGIApp, *, decider: HeartbeatDecider, prefix: str = DEFAULT_PREFIX
    ) -> None:
        routes = [
            Route("/heartbeat/{tmux_session_id}", self.decision),
            Route("/heartbeat/{tmux_session_id}/decisions", self.decisions),
        ]
        super().__init__(app, Router(prefix.rstrip("/"), routes))
        self.decider = decider

    @property
    def plugins(self) -> Plugins:
        return self.decider.plugins

    async def decision(self, request: Request) -> None:
        tmux_session = await self.readable_session(request)
        decision = await self.decider.decide(tmux_session)
        await send_json(request.send, 200, decision.as_json())

    async def decisions(self, request: Request) -> None:
        tmux_session = await self.readable_session(request)
        limit = query_limit(request)
        listed = await self.decider.history(tmux_session, limit)
        await send_json(request.send, 200, {"tmux_session_id": tmux_session, "decisions": listed})

    async def readable_session(self, request: Request) -> str:
        """The path's tmux session, if the principal may read it; else a 404."""
        tmux_session = path_tmux_session(request)
        if not await self.may_read(request.principal, tmux_session):
            raise HTTPError(
                404, TMUX_SESSION_NOT_FOUND, NOT_FOUND.format(tmux_session=tmux_session)
            )
        return tmux_session

    async def may_read(self, principal: Principal, tmux_session: str) -> bool:
        if principal.operator:
            return True
        log = self.decider.log

        def read() -> tuple[str | None, list[str]]:
            return claims_of(log).holder(tmux_session), bindings_of(log).streams_of(tmux_session)

        holder, streams = await asyncio.to_thread(read)
        if holder == principal.user_id:
            return True
        for stream in streams[:MAX_STREAMS_ASKED]:
            if await self.plugins.authorize_subscription(principal, stream):
                return True
        return False
