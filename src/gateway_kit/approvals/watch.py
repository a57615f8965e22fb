"""`ApprovalWatch`: the approvals' view of what the session pumps write.

For each goose event written: an ``actionRequired`` item becomes an approval (the same one
when seen again), a ``toolResponse`` proves an answer arrived. Most events are streamed text:
their JSON text is searched for the two item types before it is decoded, so they cost a
substring search. A goosed restart voids what goose waited for in its previous lifetime, and
those runs end saying so.

A pump that takes a session over reads back what the runs it adopts wrote in the current
lifetime: a process that died between writing goose's request and recording its approval
(or between a tool's response and noting the delivery) leaves nothing undone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from ..bindings.goose_sessions import SessionBinding
from ..log import Event
from ..runs.model import Run
from ..upstream.frames import UpstreamFrame
from .goose_actions import (
    ACTION_REQUIRED,
    MESSAGE,
    TOOL_RESPONSE,
    ActionRequest,
    action_requests,
    tool_response_ids,
)
from .service import ApprovalService

MARKERS = (f'"{ACTION_REQUIRED}"', f'"{TOOL_RESPONSE}"')
PAGE = 1000


def may_matter(frame: UpstreamFrame) -> bool:
    if frame.type != MESSAGE:
        return False
    raw = frame.raw
    return not raw or any(marker in raw for marker in MARKERS)


class ApprovalWatch:
    def __init__(self, service: ApprovalService) -> None:
        self.service = service

    async def written(
        self, binding: SessionBinding, frames: Sequence[UpstreamFrame], events: Sequence[Event]
    ) -> None:
        answered: list[str] = []
        for frame, event in zip(frames, events, strict=True):
            if not may_matter(frame):
                continue
            data = frame.data
            for asked in action_requests(data):
                await self._record(binding, asked, event.run_id)
            answered += tool_response_ids(data)
        if answered:
            await self.service.delivered(binding.session_id, answered)

    async def _record(
        self, binding: SessionBinding, asked: ActionRequest, run_id: str | None
    ) -> None:
        await self.service.request(
            asked,
            stream=binding.stream,
            run_id=run_id,
            session_id=binding.session_id,
            lifetime=binding.lifetime_start_seq,
        )

    async def pump_started(self, binding: SessionBinding, runs: Sequence[Run]) -> None:
        for run in runs:
            asked, answered = await asyncio.to_thread(self._read_back, binding, run.run_id)
            for request in asked:
                if request.request_id not in answered:
                    await self._record(binding, request, run.run_id)
            if answered:
                await self.service.delivered(binding.session_id, sorted(answered))

    def _read_back(
        self, binding: SessionBinding, run_id: str
    ) -> tuple[list[ActionRequest], set[str]]:
        """What goose asked in the run's events of this lifetime, and the ids it answered."""
        log = self.service.store.log
        asked: list[ActionRequest] = []
        answered: set[str] = set()
        after = binding.lifetime_start_seq
        while True:
            page = log.read(after, run_id=run_id, types=(MESSAGE,), limit=PAGE, settled=False)
            for event in page:
                if not any(marker in event.data_json for marker in MARKERS):
                    continue
                asked += action_requests(event.data)
                answered.update(tool_response_ids(event.data))
            if len(page) < PAGE:
                return asked, answered
            after = page[-1].seq

    async def lifetime_ended(self, binding: SessionBinding, new_start: int) -> Mapping[str, str]:
        return await self.service.lifetime_ended(binding.session_id, new_start)
