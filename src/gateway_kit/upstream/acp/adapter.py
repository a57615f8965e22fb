"""`AcpAdapter`: an ACP agent as the upstream (`gateway_kit.upstream.adapter.UpstreamAdapter`)."""

from __future__ import annotations

from typing import Any

from ...exceptions import UpstreamError
from ...runs.ports import Pumps, Upstream
from ..adapter import ApprovalAnswers, PumpParts
from .runs import AcpRuns
from .upstream import AcpUpstream

NO_GOOSE_ANSWERS = (
    "an ACP agent asks permission within its turn and is answered there: it takes no goose "
    "confirmation or elicitation answer"
)


class _NoGooseAnswers:
    async def reply(self, session_id: str, message: Any) -> object:
        raise UpstreamError(NO_GOOSE_ANSWERS)

    async def confirm_tool_action(self, session_id: str, tool_request_id: str, action: str) -> None:
        raise UpstreamError(NO_GOOSE_ANSWERS)


class AcpAdapter:
    """Each attempt is a prompt whose turn writes its own events (`AcpRuns`): the runs' port
    and their pumps are one object."""

    def __init__(self, upstream: AcpUpstream) -> None:
        self.upstream = upstream
        self.runs = AcpRuns(upstream)

    @property
    def port(self) -> Upstream:
        return self.runs

    @property
    def answers(self) -> ApprovalAnswers:
        return _NoGooseAnswers()

    def pumps(self, parts: PumpParts) -> Pumps:
        self.runs.attach(log=parts.log, store=parts.store, lifecycle=parts.lifecycle)
        return self.runs
