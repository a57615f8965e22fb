"""`ApprovalService`: what people and goose do to approvals, and what the gateway does on its own.

- goose asks (the session pump saw an ``actionRequired`` item): `request` records one approval
  for that invocation, or returns the one recorded already (a replay, a pump restarted);
- a person claims (advisory, shown to everyone) or decides: the first valid decision wins; a
  later one, one naming other arguments than the approval's, or one after the expiry is refused
  (`ApprovalClosed`, `ArgumentsChanged`, `ApprovalExpired`) and audited;
- the answer goes to goose (`delivery.py`) until goose shows it arrived;
- nobody decided in time: the approval expires, which is a rejection (goose is told to deny);
- goose can no longer take an answer (goosed restarted, the run ended): the approval is voided.

Every change reads the row, decides, and writes it back at the version it read; when another
change came first it reads the row again (`ApprovalStore.save`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime as dt
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import (
    ApprovalClosed,
    ApprovalExpired,
    ApprovalNotFound,
    ArgumentsChanged,
)
from ..identity.principal import Principal
from ..types import JSONObject
from .goose_actions import ActionRequest
from .model import APPROVE, DECISIONS, Approval, Kind, Status, action_for, args_hash
from .settings import ApprovalSettings
from .store import CLAIMED, DECIDED, EXPIRED, VOIDED, ApprovalStore, Changed, new_approval_id

logger = logging.getLogger("gateway_kit.approvals")

MAX_TRIES = 50  # rereads of one row under contention before giving up (never seen near it)
NO_SUCH_APPROVAL = "no approval {approval_id!r}"
DECIDED_ALREADY = "{decided_by} {status} it at {decided_at} (the first decision wins)"
CLOSED_ALREADY = "the approval is {status}: {why}"
EXPIRED_AT = "the approval expired at {expires_at}: it counts as rejected"
OTHER_ARGUMENTS = (
    "the decision names arguments {given} but the approval's are {expected}: "
    "you were shown other arguments"
)
RUN_ENDED = "the run ended before anybody decided"
GOOSE_RESTARTED = "goose restarted: its wait for this answer is gone"
ANSWERED_ELSEWHERE = "goose went on without an answer from the gateway"
BAD_DECISION = "decision must be one of {choices}, got {value!r}"


def utc(seconds: float | None) -> str:
    """A time as people read it: ISO 8601, UTC, to the millisecond."""
    moment = dt.datetime.fromtimestamp(seconds or 0.0, dt.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def sending(approval: Approval) -> JSONObject:
    """The audit's detail of one sending of an answer to goose."""
    return {"action": approval.action, "attempt": approval.attempts}


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


class ApprovalService:
    """:param store: the rows, their audit and their events.
    :param settings: expiry and delivery timings.
    :param clock: the time, in seconds since the epoch (tests move it).
    :param deliver: sends an approval's answer to goose, set by whoever can reach goose.
    """

    def __init__(
        self,
        store: ApprovalStore,
        settings: ApprovalSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.settings = settings or ApprovalSettings()
        self.clock = clock
        self.deliver: Callable[[Approval, bool], Any] | None = None

    # --- reads

    async def get(self, approval_id: str) -> Approval:
        approval = await asyncio.to_thread(self.store.get, approval_id)
        if approval is None:
            raise ApprovalNotFound(NO_SUCH_APPROVAL.format(approval_id=approval_id))
        return approval

    async def of_stream(self, stream: str) -> list[Approval]:
        return await asyncio.to_thread(self.store.of_stream, stream)

    def pending_of_streams(self, streams: Sequence[str]) -> list[tuple[str, str]]:
        return self.store.pending_of_streams(streams)

    # --- goose asks

    async def request(
        self,
        asked: ActionRequest,
        *,
        stream: str,
        run_id: str | None,
        session_id: str,
        lifetime: int,
    ) -> tuple[Approval, bool]:
        """The approval of this invocation, and whether it is new."""
        now = self.clock()
        expiry = self.settings.expiry
        if asked.kind == Kind.ELICITATION:
            expiry = min(expiry, self.settings.elicitation_timeout)
        approval = Approval(
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
        return await asyncio.to_thread(self.store.create, approval)

    # --- people

    async def claim(self, approval_id: str, principal: Principal) -> Approval:
        def change(approval: Approval, now: float) -> Approval:
            self._check_open(approval, now, principal, "claim_refused")
            return dataclasses.replace(approval, claimed_by=principal.user_id, claimed_at=now)

        return await self._change(
            approval_id, change, audit_action="claimed", principal=principal, event=CLAIMED
        )

    async def decide(
        self,
        approval_id: str,
        principal: Principal,
        *,
        decision: str,
        args_hash: str,
        reason: str | None = None,
        response: JSONObject | None = None,
    ) -> Approval:
        """Take `decision` unless someone decided first (`ApprovalClosed`), the approval
        expired (`ApprovalExpired`) or its arguments are not the ones `args_hash` names
        (`ArgumentsChanged`); each refusal is audited. The answer then goes to goose."""
        if decision not in DECISIONS:
            raise ValueError(BAD_DECISION.format(choices=", ".join(DECISIONS), value=decision))

        def change(approval: Approval, now: float) -> Approval:
            self._check_open(approval, now, principal, "decision_refused", decision)
            if args_hash != approval.args_hash:
                message = OTHER_ARGUMENTS.format(given=args_hash, expected=approval.args_hash)
                self._refused(approval, now, principal, "decision_refused", decision, message)
                raise ArgumentsChanged(message, approval)
            approved = decision == APPROVE
            return dataclasses.replace(
                approval,
                status=Status.APPROVED if approved else Status.REJECTED,
                decision=decision,
                decided_by=principal.user_id,
                decided_at=now,
                reason=reason,
                response=(response or {})
                if approved and approval.kind == Kind.ELICITATION
                else None,
                action=action_for(approval.kind, decision),
                # The first sending is written down with the decision: it leaves at once.
                attempts=approval.attempts + 1,
                attempted_at=now,
            )

        decided = await self._change(
            approval_id,
            change,
            audit_action="decided",
            principal=principal,
            event=DECIDED,
            detail={"decision": decision, "args_hash": args_hash, "reason": reason},
        )
        self._send(decided, begun=True)
        return decided

    def _check_open(
        self,
        approval: Approval,
        now: float,
        principal: Principal,
        audit_action: str,
        decision: str | None = None,
    ) -> None:
        if approval.pending and now < approval.expires_at:
            return
        # Past its expiry a pending approval is refused as the expired one it is about to be.
        error = refusal(dataclasses.replace(approval, status=Status.EXPIRED))
        if not approval.pending:
            error = refusal(approval)
        self._refused(approval, now, principal, audit_action, decision, str(error))
        raise error

    def _refused(
        self,
        approval: Approval,
        now: float,
        principal: Principal,
        audit_action: str,
        decision: str | None,
        why: str,
    ) -> None:
        detail = {"why": why, "decision": decision}
        self.store.note(
            approval.approval_id, at=now, audit_action=audit_action,
            principal=principal.user_id, detail=detail,
        )  # fmt: skip

    async def _change(
        self,
        approval_id: str,
        change: Callable[[Approval, float], Approval],
        *,
        audit_action: str,
        principal: Principal | None = None,
        event: str | None = None,
        detail: JSONObject | None = None,
    ) -> Approval:
        def attempt() -> Approval:
            for _ in range(MAX_TRIES):
                approval = self.store.get(approval_id)
                if approval is None:
                    raise ApprovalNotFound(NO_SUCH_APPROVAL.format(approval_id=approval_id))
                now = self.clock()
                after = change(approval, now)
                audit: list[tuple[str, JSONObject]] = [(audit_action, detail or {})]
                if after.attempts > approval.attempts:  # its sending is written down with it
                    audit.append(("sent", sending(after)))
                try:
                    return self.store.save(
                        approval, after, at=now, audit=audit,
                        principal=None if principal is None else principal.user_id, event=event,
                    )  # fmt: skip
                except Changed:
                    continue
            raise RuntimeError(f"approval {approval_id} kept changing under {MAX_TRIES} tries")

        return await asyncio.to_thread(attempt)

    # --- the gateway on its own

    async def close(self, approval: Approval, status: Status, why: str) -> Approval | None:
        """Expire or void `approval` unless it moved on; what it became, or None."""
        expiring = status == Status.EXPIRED

        def change(current: Approval, now: float) -> Approval:
            if expiring and not (current.pending and now >= current.expires_at):
                raise _Skip
            if not expiring and not (current.pending or current.owed):
                raise _Skip
            if current.lifetime != approval.lifetime:
                raise _Skip
            # An expired tool confirmation is denied; goose's own wait for an elicitation
            # ends by itself, and a voided one has nobody waiting.
            action = None
            if expiring and current.kind == Kind.TOOL_CONFIRMATION:
                action = action_for(current.kind, "reject")
            if not expiring:
                return dataclasses.replace(current, status=status, closed_reason=why)
            sent = action is not None
            return dataclasses.replace(
                current,
                status=status,
                closed_reason=why,
                action=action,
                attempts=current.attempts + 1 if sent else current.attempts,
                attempted_at=now if sent else current.attempted_at,
            )

        try:
            closed = await self._change(
                approval.approval_id,
                change,
                audit_action=str(status),
                event=EXPIRED if expiring else VOIDED,
                detail={"why": why},
            )
        except _Skip:
            return None
        if closed.owed:
            self._send(closed, begun=True)
        return closed

    async def delivered(self, session_id: str, request_ids: Sequence[str]) -> None:
        """goose sent the tool responses of `request_ids`: their answers arrived. A pending
        approval of one of them is moot: goose went on without it."""
        found = await asyncio.to_thread(self.store.open_of_session, session_id, request_ids)
        for approval in found:
            if approval.pending:
                await self.close(approval, Status.VOIDED, ANSWERED_ELSEWHERE)
                continue
            await self.mark_delivered(approval)

    async def mark_delivered(self, approval: Approval) -> None:
        def change(current: Approval, now: float) -> Approval:
            if not current.owed:
                raise _Skip
            return dataclasses.replace(current, delivered_at=now)

        with contextlib.suppress(_Skip):
            await self._change(
                approval.approval_id, change, audit_action="delivered",
                detail={"action": approval.action},
            )  # fmt: skip

    async def lifetime_ended(self, session_id: str, lifetime: int) -> dict[str, str]:
        """goose restarted under `session_id`: the approvals of lifetimes before `lifetime`
        that goose waited for, or owed an answer, are voided; their runs, with why each ends."""
        found = await asyncio.to_thread(self.store.open_of_session, session_id)
        ended: dict[str, str] = {}
        for approval in found:
            if approval.lifetime >= lifetime:
                continue
            closed = await self.close(approval, Status.VOIDED, GOOSE_RESTARTED)
            if closed is not None and closed.run_id is not None:
                what = closed.tool_name or "an elicitation"
                ended[closed.run_id] = (
                    f"goose restarted while the run waited for approval {closed.approval_id} "
                    f"({what}): goose lost the wait, so the run cannot go on"
                )
        return ended

    async def sweep(self) -> None:
        """One round of what nobody asks for: expiries, approvals of ended runs, answers owed
        to goose."""
        now = self.clock()
        for approval in await asyncio.to_thread(self.store.pending):
            if now >= approval.expires_at:
                await self.close(approval, Status.EXPIRED, "nobody decided in time")
        for approval in await asyncio.to_thread(self.store.pending_of_ended_runs):
            await self.close(approval, Status.VOIDED, RUN_ENDED)
        for approval in await asyncio.to_thread(self.store.owed):
            if self.due(approval, now):
                self._send(approval)

    def due(self, approval: Approval, now: float) -> bool:
        """Whether an owed answer is to be sent (again) now."""
        if approval.attempted_at is None:
            return True
        return now - approval.attempted_at >= self.settings.redeliver_delay(approval.attempts)

    def _send(self, approval: Approval, *, begun: bool = False) -> None:
        """Send `approval`'s answer; `begun` when its sending is written down already."""
        if self.deliver is not None:
            self.deliver(approval, begun)


class _Skip(Exception):
    """The approval moved on: nothing to do."""
