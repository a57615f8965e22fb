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
a restart an owed answer is sent again once its pause is over, never twice at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time

from ..coordination.tasks import TaskSet
from ..exceptions import DatabaseUnavailable, LogClosed, UpstreamError
from ..upstream.goose import GooseUpstream
from .model import Approval, Kind
from .service import ApprovalService
from .store import Changed

logger = logging.getLogger("gateway_kit.approvals")

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
    def __init__(self, service: ApprovalService, upstream: GooseUpstream) -> None:
        self.service = service
        self.store = service.store
        self.upstream = upstream
        self._tasks = TaskSet()
        self._sending: set[str] = set()  # approvals being sent by this process now
        service.deliver = self.deliver

    def deliver(self, approval: Approval) -> None:
        """Send `approval`'s answer in the background, unless it is being sent already."""
        if approval.approval_id in self._sending:
            return
        self._sending.add(approval.approval_id)
        task = self._tasks.start(self._send(approval), name=f"approval {approval.approval_id}")
        task.add_done_callback(lambda _: self._sending.discard(approval.approval_id))

    async def _send(self, approval: Approval) -> None:
        try:
            sending = await asyncio.to_thread(self._begin, approval.approval_id)
        except (LogClosed, DatabaseUnavailable) as exc:
            logger.info(
                "approval %s not sent now (%s); the sweep sends it", approval.approval_id, exc
            )
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
        attempt = approval.attempts + 1
        try:
            return self.store.save(
                approval,
                dataclasses.replace(approval, attempts=attempt, attempted_at=now),
                at=now,
                audit_action="sent",
                detail={"action": approval.action, "attempt": attempt},
            )
        except Changed:
            return None  # someone else moved it on: the sweep looks again

    async def wait_idle(self) -> None:
        await self._tasks.wait_idle()

    async def stop(self) -> None:
        await self._tasks.stop()
