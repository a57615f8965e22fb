"""`ApprovalService`: what people and goose do to approvals, and what the gateway does on its own.

- goose asks (the session pump saw an ``actionRequired`` item): `request` records one approval
  for that invocation, or returns the one recorded already (a replay, a pump restarted);
- a person claims (advisory, shown to everyone) or decides: the first valid decision wins; a
  later one, one naming other arguments than the approval's, or one after the expiry is refused
  (`ApprovalClosed`, `ArgumentsChanged`, `ApprovalExpired`) and audited;
- the answer goes to goose (`delivery.py`) until goose shows it arrived;
- nobody decided in time: the approval expires, which is a rejection (goose is told to deny);
- goose can no longer take an answer (goosed restarted, the run ended): the approval is voided.

Every change reads the row, applies one of `rules.py`'s changes, and writes it back at the
version it read; when another change came first it reads the row again (`ApprovalStore.save`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..exceptions import ApprovalClosed, ApprovalNotFound
from ..principal import Principal
from ..types import JSONObject
from . import rules
from .events import CLAIMED, DECIDED, EXPIRED, VOIDED
from .goose_actions import ActionRequest
from .model import DECISIONS, Approval
from .settings import ApprovalSettings
from .store import ApprovalStore, Changed

MAX_TRIES = 50  # rereads of one row under contention before giving up (never seen near it)
NO_SUCH_APPROVAL = "no approval {approval_id!r}"
NOBODY_DECIDED = "nobody decided in time"
RUN_ENDED = "the run ended before anybody decided"
GOOSE_RESTARTED = "goose restarted: its wait for this answer is gone"
ANSWERED_ELSEWHERE = "goose went on without an answer from the gateway"
BAD_DECISION = "decision must be one of {choices}, got {value!r}"
RUN_CANNOT_GO_ON = (
    "goose restarted while the run waited for approval {approval_id} ({what}): goose lost "
    "the wait, so the run cannot go on"
)

# A change: the row as read and the time → the row to write, or None when there is nothing to do.
Change = Callable[[Approval, float], Approval | None]


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
        approval = rules.new_approval(
            asked,
            stream=stream,
            run_id=run_id,
            session_id=session_id,
            lifetime=lifetime,
            now=self.clock(),
            settings=self.settings,
        )
        return await asyncio.to_thread(self.store.create, approval)

    # --- people

    async def claim(self, approval_id: str, principal: Principal) -> Approval:
        claimed = await self._change(
            approval_id,
            lambda approval, now: rules.claimed(approval, now, principal.user_id),
            audit_action="claimed",
            principal=principal,
            event=CLAIMED,
            refused_as="claim_refused",
        )
        assert claimed is not None  # a person's change is made or refused
        return claimed

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
            return rules.decided(
                approval, now, principal.user_id,
                decision=decision, hashed=args_hash, reason=reason, response=response,
            )  # fmt: skip

        decided = await self._change(
            approval_id,
            change,
            audit_action="decided",
            principal=principal,
            event=DECIDED,
            detail={"decision": decision, "args_hash": args_hash, "reason": reason},
            refused_as="decision_refused",
        )
        assert decided is not None
        self._send(decided, begun=True)
        return decided

    async def _change(
        self,
        approval_id: str,
        change: Change,
        *,
        audit_action: str,
        principal: Principal | None = None,
        event: str | None = None,
        detail: JSONObject | None = None,
        refused_as: str = "refused",
    ) -> Approval | None:
        """Apply `change` to the row as it is now, until it is written or refused (audited as
        `refused_as`)."""
        user_id = None if principal is None else principal.user_id

        def attempt() -> Approval | None:
            for _ in range(MAX_TRIES):
                approval = self.store.get(approval_id)
                if approval is None:
                    raise ApprovalNotFound(NO_SUCH_APPROVAL.format(approval_id=approval_id))
                now = self.clock()
                try:
                    after = change(approval, now)
                except ApprovalClosed as refused:
                    why = {"why": str(refused), "decision": (detail or {}).get("decision")}
                    self.store.note(
                        approval_id, at=now, audit_action=refused_as, principal=user_id,
                        detail=why,
                    )  # fmt: skip
                    raise
                if after is None:
                    return None
                audit: list[tuple[str, JSONObject]] = [(audit_action, detail or {})]
                if after.attempts > approval.attempts:  # its sending is written down with it
                    audit.append(("sent", rules.sending(after)))
                try:
                    return self.store.save(
                        approval, after, at=now, audit=audit, principal=user_id, event=event
                    )
                except Changed:
                    continue
            raise RuntimeError(f"approval {approval_id} kept changing under {MAX_TRIES} tries")

        return await asyncio.to_thread(attempt)

    # --- the gateway on its own

    async def expire(self, approval: Approval) -> Approval | None:
        """Expire `approval` unless it moved on (goose is told to deny); what it became."""
        expired = await self._change(
            approval.approval_id,
            lambda current, now: rules.expired(current, now, NOBODY_DECIDED),
            audit_action="expired",
            event=EXPIRED,
            detail={"why": NOBODY_DECIDED},
        )
        if expired is not None and expired.owed:
            self._send(expired, begun=True)
        return expired

    async def void(self, approval: Approval, why: str) -> Approval | None:
        """Void `approval` unless it moved on (to another lifetime, or closed); what it became."""

        def change(current: Approval, now: float) -> Approval | None:
            return rules.voided(current, why) if current.lifetime == approval.lifetime else None

        return await self._change(
            approval.approval_id, change, audit_action="voided", event=VOIDED,
            detail={"why": why},
        )  # fmt: skip

    async def delivered(self, session_id: str, request_ids: Sequence[str]) -> None:
        """goose sent the tool responses of `request_ids`: their answers arrived. A pending
        approval of one of them is moot: goose went on without it."""
        found = await asyncio.to_thread(self.store.open_of_session, session_id, request_ids)
        for approval in found:
            if approval.pending:
                await self.void(approval, ANSWERED_ELSEWHERE)
                continue
            await self.mark_delivered(approval)

    async def mark_delivered(self, approval: Approval) -> None:
        await self._change(
            approval.approval_id, rules.delivered, audit_action="delivered",
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
            closed = await self.void(approval, GOOSE_RESTARTED)
            if closed is not None and closed.run_id is not None:
                what = closed.tool_name or "an elicitation"
                message = RUN_CANNOT_GO_ON.format(approval_id=closed.approval_id, what=what)
                ended[closed.run_id] = message
        return ended

    async def sweep(self) -> None:
        """One round of what nobody asks for: expiries, approvals of ended runs, answers owed
        to goose."""
        now = self.clock()
        for approval in await asyncio.to_thread(self.store.pending):
            if now >= approval.expires_at:
                await self.expire(approval)
        for approval in await asyncio.to_thread(self.store.pending_of_ended_runs):
            await self.void(approval, RUN_ENDED)
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
