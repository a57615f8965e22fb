"""`ApprovalDelivery`: an approval's answer, sent to goose until goose shows it arrived.

A tool confirmation is answered with ``POST /action-required/tool-confirmation``. goose answers
200 to any id, known or not, so that answer proves nothing: the answer counts as delivered when
the tool's response with that id arrives on the session's events (the pump tells the service).
Until then it is sent again, with pauses that double (`ApprovalSettings.redeliver_delay`); a
goose that already took it drops a second one, since nothing waits for that id any more. An
elicitation is answered by a reply carrying an ``elicitationResponse``, which goose hands to
the waiting turn at once: its 200 is the proof.

Each sending is first written down (the attempt's number and time, and an audit entry) at the
version of the row it read: of two processes about to send the same answer, one does. So after
a restart an owed answer is sent again once its pause is over, never twice at once. The first
sending is written down in the decision's own transaction (or the expiry's), so that the
answer leaves as soon as the decision is durable, without another round trip first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time

from ..coordination.tasks import TaskSet
from ..exceptions import DatabaseUnavailable, LogClosed, UpstreamError
from ..upstream.adapter import ApprovalAnswers
from .model import Approval, Kind
from .rules import sending
from .service import ApprovalService
from .store import Changed

logger = logging.getLogger(__name__)

ELICITATION_RESPONSE = "elicitationResponse"


def elicitation_answer(approval: Approval) -> dict[str, object]:
    """The user `Message` that answers goose's elicitation."""
    data = {
        "actionType": ELICITATION_RESPONSE,
        "id": approval.request_id,
        "user_data": approval.response or {},
        "action": approval.action,
    }
    return {
        "role": "user",
        "created": int(time.time()),
        "content": [{"type": "actionRequired", "data": data}],
        "metadata": {"userVisible": False, "agentVisible": True},
    }


class ApprovalDelivery:
    def __init__(self, service: ApprovalService, upstream: ApprovalAnswers) -> None:
        self.service = service
        self.store = service.store
        self.upstream = upstream
        self._tasks = TaskSet()
        self._sending: set[str] = set()  # approvals being sent by this process now
        service.deliver = self.deliver

    def deliver(self, approval: Approval, begun: bool = False) -> None:
        """Send `approval`'s answer in the background, unless it is being sent already;
        `begun` when the sending is written down already (with the decision, or the expiry)."""
        if approval.approval_id in self._sending:
            return
        self._sending.add(approval.approval_id)
        work = self._send(approval, begun)
        task = self._tasks.start(work, name=f"approval {approval.approval_id}")
        task.add_done_callback(lambda _: self._sending.discard(approval.approval_id))

    async def _send(self, approval: Approval, begun: bool) -> None:
        sending: Approval | None = approval
        if not begun:
            try:
                sending = await asyncio.to_thread(self._begin, approval.approval_id)
            except (LogClosed, DatabaseUnavailable) as exc:
                logger.info("approval %s not sent now (%s)", approval.approval_id, exc)
                return
        if sending is None:
            return
        try:
            if sending.kind == Kind.ELICITATION:
                await self.upstream.reply(sending.session_id, elicitation_answer(sending))
            else:
                assert sending.action is not None  # owed answers have one
                await self.upstream.confirm_tool_action(
                    sending.session_id, sending.request_id, sending.action
                )
        except UpstreamError as exc:
            logger.warning(
                "sending the answer of approval %s to goose failed (%s); it is sent again",
                sending.approval_id,
                exc,
            )
            await self._note_failure(sending, exc)
            return
        if sending.kind == Kind.ELICITATION:
            await self.service.mark_delivered(sending)

    def _begin(self, approval_id: str) -> Approval | None:
        """Write down one more sending of the approval's answer; None when it is not owed, its
        pause is not over, or another process writes it down first."""
        approval = self.store.get(approval_id)
        service = self.service
        if approval is None or not approval.owed:
            return None
        now = service.clock()
        if not service.due(approval, now):
            return None
        after = dataclasses.replace(approval, attempts=approval.attempts + 1, attempted_at=now)
        try:
            return self.store.save(approval, after, at=now, audit=[("sent", sending(after))])
        except Changed:
            return None  # someone else moved it on: the sweep looks again

    async def _note_failure(self, approval: Approval, error: Exception) -> None:
        detail = {**sending(approval), "error": str(error)}
        # The sending's own entry is there already; this one only says why it failed.
        with contextlib.suppress(LogClosed, DatabaseUnavailable):
            await asyncio.to_thread(
                self.store.note, approval.approval_id, at=self.service.clock(),
                audit_action="send_failed", detail=detail,
            )  # fmt: skip

    async def wait_idle(self) -> None:
        await self._tasks.wait_idle()

    async def stop(self) -> None:
        await self._tasks.stop()
