"""The legacy app's shapes of tool approvals, answered from the gateway's durable ones.

    GET /api/plan-approvals/pending[?conversation_id=C]
        → {"success": true, "approvals": [{"id", "approval_id", "conversation_id", "username",
           "tool_name", "arguments", "prompt", "status": "pending", "created_at",
           "expires_at", "claimed_by"}]}

and, for the gateway's Socket.IO server to send beside each approval event's ``event`` message
(`legacy_events`): ``tool_approval_required`` {"approval_id", "id", "conversation_id",
"tool_name", "arguments", "prompt", "args_hash", "expires_at"} for ``approval_requested``, and
``tool_approval_resolved`` {"approval_id", "id", "conversation_id", "approved", "status",
"decided_by", "reason"} for ``approval_decided``, ``approval_expired`` and ``approval_voided``.

The legacy server kept these approvals in process memory, bound to a username and a
conversation: a restart lost every pending one. Here they are the gateway's rows, so an old
client still finds, after a restart, the approval it was shown. ``id`` is the ``approval_id``;
``username`` is the conversation's owner when one is recorded, else the user asking; times are
epoch seconds. Arguments an event cannot hold are left out of it (``arguments`` null, and
``arguments_omitted`` says why): the list shows them whole. Only tool confirmations have a
legacy shape: a question goose asks the user (an elicitation) is served by the gateway's own
routes alone.

The pending list holds what the principal may read (`authorize_subscription`, stream by
stream), as the gateway's own ``GET {prefix}/streams/{s}/approvals`` does: the ``anonymous``
principal, which only a gateway that allows anonymous requests has, reads what that rule lets
it. No principal is a 401; a ``conversation_id`` no stream can have is a 400 (an empty one is
no filter, as an absent one). The route only reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa

from ..hooks import Plugins
from ..http.errors import HTTPError, send_json
from ..http.request import Request, relative_path
from ..http.routing import INVALID_STREAM, Route, Router, unfit_stream
from ..identity.owners import StreamOwners
from ..log import EventLog
from ..settings import DEFAULT_LEGACY_APPROVALS_PATH
from ..types import ASGIApp, JSONObject, Receive, Scope, Send
from .events import DECIDED, EXPIRED, REQUESTED, VOIDED
from .model import Approval, Kind, Status
from .service import ApprovalService
from .tables import approvals

TOOL_APPROVAL_REQUIRED = "tool_approval_required"
TOOL_APPROVAL_RESOLVED = "tool_approval_resolved"
RESOLVING = (DECIDED, EXPIRED, VOIDED)
CONVERSATION_PARAM = "conversation_id"
OMITTED = "arguments_omitted"

PENDING_TOOL_APPROVALS = (
    sa.select(approvals)
    .where(approvals.c.status == Status.PENDING, approvals.c.kind == Kind.TOOL_CONFIRMATION)
    .order_by(approvals.c.requested_at, approvals.c.approval_id)
)
PENDING_TOOL_APPROVALS_OF_STREAM = PENDING_TOOL_APPROVALS.where(
    approvals.c.stream == sa.bindparam("stream")
)

LegacyMessage = tuple[str, JSONObject]


# --- the shapes (pure)


def _tool_approval(data: Any) -> Mapping[str, Any] | None:
    """An approval event's data when it is a tool confirmation's, as the gateway writes it."""
    if (
        isinstance(data, Mapping)
        and data.get("kind") == Kind.TOOL_CONFIRMATION
        and isinstance(data.get("approval_id"), str)
        and isinstance(data.get("stream"), str)
    ):
        return data
    return None


def required_message(data: Any) -> JSONObject | None:
    """The ``tool_approval_required`` payload of an approval's JSON; None for anything else."""
    approval = _tool_approval(data)
    if approval is None:
        return None
    payload = {
        "approval_id": approval["approval_id"],
        "id": approval["approval_id"],
        "conversation_id": approval["stream"],
        "tool_name": approval.get("tool_name"),
        "arguments": approval.get("arguments"),
        "prompt": approval.get("prompt"),
        "args_hash": approval.get("args_hash"),
        "expires_at": approval.get("expires_at"),
    }
    if OMITTED in approval:  # arguments the event could not hold: the list has them
        payload[OMITTED] = approval[OMITTED]
    return payload


def resolved_message(data: Any) -> JSONObject | None:
    """The ``tool_approval_resolved`` payload of an approval's JSON; None for anything else.
    ``reason`` is the decider's, else why the gateway closed it (expired, voided)."""
    approval = _tool_approval(data)
    if approval is None:
        return None
    return {
        "approval_id": approval["approval_id"],
        "id": approval["approval_id"],
        "conversation_id": approval["stream"],
        "approved": approval.get("status") == Status.APPROVED,
        "status": approval.get("status"),
        "decided_by": approval.get("decided_by"),
        "reason": approval.get("reason") or approval.get("closed_reason"),
    }


def legacy_events(envelope: Mapping[str, Any]) -> list[LegacyMessage]:
    """The legacy messages a log event's envelope also makes, (name, payload) each: none but
    for the events of a tool approval asked for or closed."""
    kind = envelope.get("type")
    if kind == REQUESTED:
        payload, name = required_message(envelope.get("data")), TOOL_APPROVAL_REQUIRED
    elif kind in RESOLVING:
        payload, name = resolved_message(envelope.get("data")), TOOL_APPROVAL_RESOLVED
    else:
        return []
    return [] if payload is None else [(name, payload)]


def pending_item(approval: Approval, username: str) -> JSONObject:
    """One pending approval as the legacy list shows it."""
    return {
        "id": approval.approval_id,
        "approval_id": approval.approval_id,
        "conversation_id": approval.stream,
        "username": username,
        "tool_name": approval.tool_name,
        "arguments": approval.arguments,
        "prompt": approval.prompt,
        "status": approval.status,
        "created_at": approval.requested_at,
        "expires_at": approval.expires_at,
        "claimed_by": approval.claimed_by,
    }


# --- the reads


def pending_tool_approvals(log: EventLog, stream: str | None = None) -> list[Approval]:
    """The pending tool confirmations, of `stream` or of every stream, oldest first."""
    if stream is None:
        rows = log.tables.select(PENDING_TOOL_APPROVALS)
    else:
        rows = log.tables.select(PENDING_TOOL_APPROVALS_OF_STREAM, {"stream": stream})
    return [Approval.from_row(row) for row in rows]


def owners_of(log: EventLog, streams: Iterable[str]) -> dict[str, str]:
    """The recorded owner of each of `streams` that has one."""
    owners = StreamOwners(log)
    found = {stream: owners.owner(stream) for stream in streams}
    return {stream: owner for stream, owner in found.items() if owner is not None}


def conversation_of(request: Request) -> str | None:
    """The conversation the query names; None for every one; a 400 for a name no stream can
    have."""
    value = request.query.get(CONVERSATION_PARAM)
    if not value:
        return None
    unfit = unfit_stream(value)
    if unfit is not None:
        raise HTTPError(400, INVALID_STREAM, unfit)
    return value


# --- the route


class LegacyPendingApprovals:
    """Answers ``GET {path}`` with the legacy list of pending tool approvals; every other
    request passes on to the app below.

    :param approvals: the approvals (None: a gateway without an upstream has none, and the
        list is empty).
    :param plugins: whose `authorize_subscription` decides whose approvals are listed.
    :param path: where the legacy list lives.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        approvals: ApprovalService | None,
        plugins: Plugins,
        path: str = DEFAULT_LEGACY_APPROVALS_PATH,
    ) -> None:
        self.app = app
        self.approvals = approvals
        self.plugins = plugins
        self.legacy_path = path
        self.legacy = Router("", [Route(path, self.pending)])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and relative_path(scope) == self.legacy_path
            and await self.legacy.handle(scope, receive, send)
        ):
            return
        await self.app(scope, receive, send)

    async def pending(self, request: Request) -> None:
        principal = request.principal
        stream = conversation_of(request)
        items: list[JSONObject] = []
        if self.approvals is not None:
            log = self.approvals.store.log
            found = await asyncio.to_thread(pending_tool_approvals, log, stream)
            streams = sorted({approval.stream for approval in found})
            allowed = await asyncio.gather(
                *(self.plugins.authorize_subscription(principal, s) for s in streams)
            )
            readable = {s for s, ok in zip(streams, allowed, strict=True) if ok}
            owners = await asyncio.to_thread(owners_of, log, readable) if readable else {}
            items = [
                pending_item(approval, owners.get(approval.stream, principal.user_id))
                for approval in found
                if approval.stream in readable
            ]
        await send_json(request.send, 200, {"success": True, "approvals": items})
