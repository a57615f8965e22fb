"""What an approval allows: each change as a pure function of the row as read and the time.

A person's change (a claim, a decision) either gives the row it makes or raises the refusal
the person is told (`ApprovalClosed` and its kinds). The gateway's own changes (an expiry, a
voiding, a delivery) give the row, or None when the approval moved on and there is nothing to
do. `ApprovalService` reads, applies one of these, and writes back at the version it read.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from ..exceptions import ApprovalClosed, ApprovalExpired, ArgumentsChanged
from ..types import JSONObject
from .goose_actions import ActionRequest
from .model import (
    APPROVE,
    REJECT,
    Approval,
    Kind,
    Status,
    action_for,
    args_hash,
    new_approval_id,
)
from .settings import ApprovalSettings

DECIDED_ALREADY = "{decided_by} {status} it at {decided_at} (the first decision wins)"
CLOSED_ALREADY = "the approval is {status}: {why}"
EXPIRED_AT = "the approval expired at {expires_at}: it counts as rejected"
OTHER_ARGUMENTS = (
    "the decision names arguments {given} but the approval's are {expected}: "
    "you were shown other arguments"
)


def utc(seconds: float | None) -> str:
    """A time as people read it: ISO 8601, UTC, to the millisecond."""
    moment = dt.datetime.fromtimestamp(seconds or 0.0, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sending(approval: Approval) -> JSONObject:
    """The audit's detail of one sending of an answer to goose."""
    return {"action": approval.action, "attempt": approval.attempts}


def new_approval(
    asked: ActionRequest,
    *,
    stream: str,
    run_id: str | None,
    session_id: str,
    lifetime: int,
    now: float,
    settings: ApprovalSettings,
) -> Approval:
    expiry = settings.expiry
    if asked.kind == Kind.ELICITATION:  # goose stops waiting for one by itself
        expiry = min(expiry, settings.elicitation_timeout)
    return Approval(
        approval_id=new_approval_id(),
        kind=asked.kind,
        stream=stream,
        run_id=run_id,
        session_id=session_id,
        lifetime=lifetime,
        request_id=asked.request_id,
        tool_name=asked.tool_name,
        arguments=asked.arguments,
        args_hash=args_hash(asked.arguments),
        prompt=asked.prompt,
        status=Status.PENDING,
        requested_at=now,
        expires_at=now + expiry,
    )


def refusal(approval: Approval) -> ApprovalClosed:
    """Why `approval`, closed, takes no more claims or decisions."""
    if approval.status == Status.EXPIRED:
        return ApprovalExpired(EXPIRED_AT.format(expires_at=utc(approval.expires_at)), approval)
    if approval.status in (Status.APPROVED, Status.REJECTED):
        message = DECIDED_ALREADY.format(
            decided_by=approval.decided_by,
            status=approval.status,
            decided_at=utc(approval.decided_at),
        )
        return ApprovalClosed(message, approval)
    why = approval.closed_reason or "closed"
    return ApprovalClosed(CLOSED_ALREADY.format(status=approval.status, why=why), approval)


def check_open(approval: Approval, now: float) -> None:
    """Raise the refusal of a claim or decision unless `approval` still takes one."""
    if approval.pending and now < approval.expires_at:
        return
    if approval.pending:  # past its expiry: refused as the expired one it is about to be
        raise refusal(dataclasses.replace(approval, status=Status.EXPIRED))
    raise refusal(approval)


def claimed(approval: Approval, now: float, user_id: str) -> Approval:
    check_open(approval, now)
    return dataclasses.replace(approval, claimed_by=user_id, claimed_at=now)


def decided(
    approval: Approval,
    now: float,
    user_id: str,
    *,
    decision: str,
    hashed: str,
    reason: str | None,
    response: JSONObject | None,
) -> Approval:
    check_open(approval, now)
    if hashed != approval.args_hash:
        message = OTHER_ARGUMENTS.format(given=hashed, expected=approval.args_hash)
        raise ArgumentsChanged(message, approval)
    approved = decision == APPROVE
    elicited = approved and approval.kind == Kind.ELICITATION
    return dataclasses.replace(
        approval,
        status=Status.APPROVED if approved else Status.REJECTED,
        decision=decision,
        decided_by=user_id,
        decided_at=now,
        reason=reason,
        response=(response or {}) if elicited else None,
        action=action_for(approval.kind, decision),
        # The first sending is written down with the decision: it leaves at once.
        attempts=approval.attempts + 1,
        attempted_at=now,
    )


def expired(current: Approval, now: float, why: str) -> Approval | None:
    """A pending approval past its expiry, rejected: a tool confirmation is denied (its
    sending written down with it); goose stops waiting for an elicitation by itself."""
    if not (current.pending and now >= current.expires_at):
        return None
    if current.kind != Kind.TOOL_CONFIRMATION:
        return dataclasses.replace(current, status=Status.EXPIRED, closed_reason=why)
    return dataclasses.replace(
        current,
        status=Status.EXPIRED,
        closed_reason=why,
        action=action_for(current.kind, REJECT),
        attempts=current.attempts + 1,
        attempted_at=now,
    )


def voided(current: Approval, why: str) -> Approval | None:
    """An approval goose no longer waits for, or can no longer take the answer of."""
    if not (current.pending or current.owed):
        return None
    return dataclasses.replace(current, status=Status.VOIDED, closed_reason=why)


def delivered(current: Approval, now: float) -> Approval | None:
    if not current.owed:
        return None
    return dataclasses.replace(current, delivered_at=now)
