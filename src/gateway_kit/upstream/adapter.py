"""`UpstreamAdapter`: what the composition asks of an upstream adapter, whichever it is.

An adapter is a folder of `gateway_kit.upstream` with one factory fitting this protocol: the
port runs talk to (`gateway_kit.runs.ports.Upstream`), the pumps that write a session's events
(`gateway_kit.runs.ports.Pumps`), and what sends an approval's answer (`ApprovalAnswers`).
`gateway_kit.gateway.adapters` picks the factory from the upstream object a gateway is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ..log import EventLog
from ..runs.lifecycle import RunLifecycle
from ..runs.ports import Pumps, Upstream
from ..runs.store import RunStore
from .pump_settings import PumpSettings
from .watchers import PumpWatcher


@dataclass(frozen=True, slots=True)
class PumpParts:
    """What an adapter's pumps write to and report to, built by the composition."""

    log: EventLog
    store: RunStore
    lifecycle: RunLifecycle
    settings: PumpSettings
    watcher: PumpWatcher | None = None


class ApprovalAnswers(Protocol):
    """Sends a decided approval's answer to the agent (`gateway_kit.approvals.delivery`)."""

    async def reply(self, session_id: str, message: Any) -> object: ...

    async def confirm_tool_action(
        self, session_id: str, tool_request_id: str, action: str
    ) -> None: ...


class UpstreamAdapter(Protocol):
    @property
    def port(self) -> Upstream:
        """What runs and their lifecycle talk to."""

    @property
    def answers(self) -> ApprovalAnswers:
        """What approvals send their answers through."""

    def pumps(self, parts: PumpParts) -> Pumps:
        """The pumps that write the sessions' events, reporting to `parts.lifecycle`."""
