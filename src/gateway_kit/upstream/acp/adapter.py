"""`AcpAdapter`: an ACP agent as the upstream (`gateway_kit.upstream.adapter.UpstreamAdapter`)."""

from __future__ import annotations

from typing import Any

from ...exceptions import UpstreamError
from ...runs.ports import Pumps, Upstream
from ..adapter import ApprovalAnswers, PumpParts
from .keeping import RunKeeping
from .permissions import deny
from .runs import AcpRuns, is_acp_session
from .upstream import AcpUpstream

NO_ELICITATIONS = "an ACP agent asks no elicitation of the gateway: it has nothing to answer"


class _PermissionAnswers:
    """An approval's answer, given to the permission request its tool call waits on."""

    def __init__(self, runs: AcpRuns) -> None:
        self.runs = runs

    async def reply(self, session_id: str, message: Any) -> object:
        raise UpstreamError(NO_ELICITATIONS)

    async def confirm_tool_action(self, session_id: str, tool_request_id: str, action: str) -> None:
        # A request nobody waits for any more was answered before (a redelivery), or went with
        # its turn: as goose, which takes any id, nothing is said.
        self.runs.decide(session_id, tool_request_id, action)


class AcpAdapter:
    """Each attempt is a prompt whose turn writes its own events (`AcpRuns`): the runs' port
    and their pumps are one object."""

    def __init__(self, upstream: AcpUpstream) -> None:
        self.upstream = upstream
        self.runs = AcpRuns(upstream)
        if upstream.permissions is deny:  # nobody decides otherwise: the approvals do
            upstream.permissions = self.runs.permission
        self._answers = _PermissionAnswers(self.runs)

    @property
    def port(self) -> Upstream:
        return self.runs

    @property
    def answers(self) -> ApprovalAnswers:
        return self._answers

    def pumps(self, parts: PumpParts) -> Pumps:
        keeping = RunKeeping(
            log=parts.log,
            store=parts.store,
            lifecycle=parts.lifecycle,
            is_ours=is_acp_session,
            ttl=parts.settings.lease_ttl,
            scan_interval=parts.settings.scan_interval,
        )
        self.runs.attach(
            log=parts.log,
            store=parts.store,
            lifecycle=parts.lifecycle,
            watcher=parts.watcher,
            keeping=keeping,
        )
        return self.runs
