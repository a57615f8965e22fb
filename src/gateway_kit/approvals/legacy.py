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
stream), as the gateway's own ``GET {prefix}/streams/{s}/approvals`` does, oldest first and
`MOST_PENDING` at most. The principal's own streams are found in the query, before the limit,
so that nobody else's approvals, however many, push them out; then the streams of others that
hold pending approvals (the `MOST_PENDING` whose oldest is oldest), each asked of the plugins,
fill what room is left. The ``anonymous`` principal, which only a gateway that allows anonymous
requests has, reads what that rule lets it. No principal is a 401; a ``conversation_id`` no
stream can have is a 400 (an empty one is no filter, as an absent one). The route only reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from ..hooks import Plugins
from ..http.errors import HTTPError, send_json
from ..http.request import Request
from ..http.routing import INVALID_STREAM, unfit_stream
from ..identity.owners import StreamOwners
from ..principal import Principal
from ..types import JSONObject
from .events import DECIDED, EXPIRED, REQUESTED, VOIDED
from .model import Approval, Kind, Status
from .service import ApprovalService
from .store import MOST_PENDING, ApprovalStore

TOOL_APPROVAL_REQUIRED = "tool_approval_required"
TOOL_APPROVAL_RESOLVED = "tool_approval_resolved"
RESOLVING = (DECIDED, EXPIRED, VOIDED)
CONVERSATION_PARAM = "conversation_id"
OMITTED = "arguments_omitted"

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


async def legacy_pending(
    request: Request, approvals: ApprovalService | None, plugins: Plugins
) -> None:
    """Answer the legacy ``GET /api/plan-approvals/pending[?conversation_id=C]``: the pending
    tool confirmations of every stream the principal may read (or of the one named)."""
    principal = request.principal
    stream = conversation_of(request)
    items: list[JSONObject] = []
    if approvals is not None:
        store = approvals.store
        found = await readable_pending(store, principal, plugins, stream)
        readable = {approval.stream for approval in found}
        owners = await asyncio.to_thread(StreamOwners(store.log).owners, readable)
        items = [
            pending_item(approval, owners.get(approval.stream, principal.user_id))
            for approval in found
        ]
    await send_json(request.send, 200, {"success": True, "approvals": items})


async def readable_pending(
    store: ApprovalStore, principal: Principal, plugins: Plugins, stream: str | None
) -> list[Approval]:
    """The pending tool confirmations `principal` may read, of `stream` or of every stream,
    oldest first, `MOST_PENDING` at most: those of its own streams first, then those of other
    streams a plugin lets it read, as many as still fit."""

    async def allowed(streams: Sequence[str]) -> set[str]:
        answers = await asyncio.gather(
            *(plugins.authorize_subscription(principal, s) for s in streams)
        )
        return {s for s, ok in zip(streams, answers, strict=True) if ok}

    if stream is not None:
        if not await allowed([stream]):
            return []
        return await asyncio.to_thread(store.pending_tool_confirmations, [stream])
    own = await asyncio.to_thread(store.pending_tool_confirmations_owned_by, principal.user_id)
    others = await asyncio.to_thread(
        store.streams_with_pending_tool_confirmations, principal.user_id
    )
    readable = await allowed(sorted({approval.stream for approval in own} | set(others)))
    mine = [approval for approval in own if approval.stream in readable]
    shared = [s for s in others if s in readable]
    theirs = await asyncio.to_thread(
        store.pending_tool_confirmations, shared, MOST_PENDING - len(mine)
    )
    return sorted(mine + theirs, key=lambda a: (a.requested_at, a.approval_id))
