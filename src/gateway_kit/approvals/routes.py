"""`ApprovalRoutes`: approvals over HTTP, as a middleware usable around any ASGI app.

    GET  {prefix}/streams/{stream}/approvals   → {"approvals": [approval…]}: pending ones
                                                 (oldest first), then recent closed ones
    POST {prefix}/approvals/{id}/claim         → {"approval"}: an advisory claim, shown to
                                                 every client of the stream
    POST {prefix}/approvals/{id}/decision      {"decision": "approve"|"reject", "args_hash",
                                                 "reason"?, "response"?} → {"approval"}
    GET  /api/plan-approvals/pending           the legacy clients' list, in their shape

Every route needs a principal, a 401 before anything is looked up: without credentials a real
approval is answered as an unknown one. An approval is used by whom `authorize_subscription`
lets read its stream; for anybody else it does not exist (the 404 of an unknown id, the same
body). The first valid decision wins; a
later one is a 409 ``approval_closed`` whose body names who decided what and when (its
``approval``); a decision naming other arguments than the approval's (``args_hash``) is a 409
``arguments_changed``; a claim or decision after the expiry is a 410 ``approval_expired``.
A body that is not what the route takes is a 400 (415 without a JSON content type, 413 too
large), before anything is written. Every refused decision is in the approval's audit.
"""

from __future__ import annotations

import re
from typing import Any

from ..exceptions import ApprovalClosed, ApprovalExpired, ApprovalNotFound, ArgumentsChanged
from ..hooks import Plugins
from ..http.body import read_json_body
from ..http.errors import INVALID_BODY, HTTPError, send_json
from ..http.request import Request
from ..http.routing import Route, Router, RoutesMiddleware, path_stream
from ..settings import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_PREFIX,
)
from ..types import ASGIApp
from .legacy import legacy_pending
from .model import DECISIONS, Approval
from .service import ApprovalService

APPROVAL_NOT_FOUND = "approval_not_found"
APPROVAL_CLOSED = "approval_closed"
APPROVAL_EXPIRED = "approval_expired"
ARGUMENTS_CHANGED = "arguments_changed"
NO_SUCH_APPROVAL = "no approval {approval_id!r} of a stream you may read"
APPROVAL_ID = re.compile(r"apr_[0-9a-f]{32}")
ARGS_HASH = re.compile(r"[0-9a-f]{64}")
MAX_REASON = 2000  # characters
BAD_DECISION = (
    'the body must be a JSON object: {"decision": "approve" or "reject", "args_hash": the '
    'approval\'s (64 hex digits), "reason"?: text of at most 2000 characters, "response"?: '
    "an object (an elicitation's answer)}"
)


def decision_of(body: Any) -> tuple[str, str, str | None, dict[str, Any] | None]:
    """(decision, args_hash, reason, response) of a decision's body; a 400 otherwise."""
    if not isinstance(body, dict):
        raise HTTPError(400, INVALID_BODY, BAD_DECISION)
    decision, hashed = body.get("decision"), body.get("args_hash")
    reason, response = body.get("reason"), body.get("response")
    if (
        decision not in DECISIONS
        or not isinstance(hashed, str)
        or not ARGS_HASH.fullmatch(hashed)
        or not (reason is None or (isinstance(reason, str) and len(reason) <= MAX_REASON))
        or not (response is None or isinstance(response, dict))
    ):
        raise HTTPError(400, INVALID_BODY, BAD_DECISION)
    return decision, hashed, reason, response


async def send_refusal(request: Request, error: ApprovalClosed) -> None:
    if isinstance(error, ApprovalExpired):
        status, code = 410, APPROVAL_EXPIRED
    elif isinstance(error, ArgumentsChanged):
        status, code = 409, ARGUMENTS_CHANGED
    else:
        status, code = 409, APPROVAL_CLOSED
    approval: Approval = error.approval
    body = {"error": code, "message": str(error), "approval": approval.as_json()}
    await send_json(request.send, status, body)


class ApprovalRoutes(RoutesMiddleware):
    """:param approvals: the approvals (None: a gateway without an upstream has none, and
        every route answers as for an unknown approval, or an empty list).
    :param plugins: whose `authorize_subscription` decides who sees which stream's approvals.
    :param legacy_path: where the legacy clients' list of pending approvals lives
        (`gateway_kit.approvals.legacy`); None leaves that path to the app.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        approvals: ApprovalService | None,
        plugins: Plugins,
        prefix: str = DEFAULT_PREFIX,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        legacy_path: str | None = None,
    ) -> None:
        routes = [
            Route("/streams/{stream}/approvals", self.list_approvals),
            Route("/approvals/{approval_id}/claim", self.claim, methods=("POST",)),
            Route("/approvals/{approval_id}/decision", self.decide, methods=("POST",)),
        ]
        super().__init__(
            app,
            Router(prefix.rstrip("/"), routes),
            legacy=(legacy_path, self.legacy_pending) if legacy_path else None,
        )
        self.approvals = approvals
        self.plugins = plugins
        self.max_body_bytes = max_body_bytes
        self.body_timeout = body_timeout

    async def legacy_pending(self, request: Request) -> None:
        await legacy_pending(request, self.approvals, self.plugins)

    async def list_approvals(self, request: Request) -> None:
        principal = request.principal  # a 401 before anything else
        stream = path_stream(request)
        await self.plugins.require_read(principal, stream)
        found = [] if self.approvals is None else await self.approvals.of_stream(stream)
        await send_json(request.send, 200, {"approvals": [a.as_json() for a in found]})

    async def _approval(self, request: Request) -> tuple[ApprovalService, str]:
        """The approval service and the id of an approval the principal may use; a 404 for
        any other id, before the body is read. Without a principal, a 401 before the id is
        looked at: a real id and an unknown one are answered alike."""
        principal = request.principal
        approval_id = request.path_params["approval_id"]
        not_found = HTTPError(
            404, APPROVAL_NOT_FOUND, NO_SUCH_APPROVAL.format(approval_id=approval_id[:100])
        )
        if self.approvals is None or not APPROVAL_ID.fullmatch(approval_id):
            raise not_found
        try:
            approval = await self.approvals.get(approval_id)
        except ApprovalNotFound:
            raise not_found from None
        if not await self.plugins.authorize_subscription(principal, approval.stream):
            raise not_found
        return self.approvals, approval_id

    async def claim(self, request: Request) -> None:
        approvals, approval_id = await self._approval(request)
        try:
            claimed = await approvals.claim(approval_id, request.principal)
        except ApprovalClosed as error:
            await send_refusal(request, error)
            return
        await send_json(request.send, 200, {"approval": claimed.as_json()})

    async def decide(self, request: Request) -> None:
        approvals, approval_id = await self._approval(request)
        body = await read_json_body(
            request, max_bytes=self.max_body_bytes, timeout=self.body_timeout
        )
        decision, hashed, reason, response = decision_of(body)
        try:
            decided = await approvals.decide(
                approval_id,
                request.principal,
                decision=decision,
                args_hash=hashed,
                reason=reason,
                response=response,
            )
        except ApprovalClosed as error:
            await send_refusal(request, error)
            return
        await send_json(request.send, 200, {"approval": decided.as_json()})
