"""`GooseAdapter`: goosed as the upstream (`gateway_kit.upstream.adapter.UpstreamAdapter`)."""

from __future__ import annotations

from ...runs.ports import Pumps, Upstream
from ..adapter import ApprovalAnswers, PumpParts
from .client import GooseUpstream
from .pumps import PumpManager


class GooseAdapter:
    """goose answers replies at once; a pump per session reads its events into the log."""

    def __init__(self, upstream: GooseUpstream) -> None:
        self.upstream = upstream

    @property
    def port(self) -> Upstream:
        return self.upstream

    @property
    def answers(self) -> ApprovalAnswers:
        return self.upstream

    def pumps(self, parts: PumpParts) -> Pumps:
        return PumpManager(
            log=parts.log,
            store=parts.store,
            upstream=self.upstream,
            settings=parts.settings,
            lifecycle=parts.lifecycle,
            watcher=parts.watcher,
        )
