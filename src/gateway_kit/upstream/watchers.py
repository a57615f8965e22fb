"""`PumpWatcher`: what a session pump tells the parts that follow goose's events as they are
written (the approvals, which see goose ask for a confirmation and see its answer land)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from ..bindings.goose_sessions import SessionBinding
from ..log import Event
from ..runs.model import Run
from .frames import UpstreamFrame


class PumpWatcher(Protocol):
    async def pump_started(self, binding: SessionBinding, runs: Sequence[Run]) -> None:
        """A pump took the session over with these active runs: catch up on what it wrote
        before (a process that died between writing an event and acting on it)."""

    async def written(
        self, binding: SessionBinding, frames: Sequence[UpstreamFrame], events: Sequence[Event]
    ) -> None:
        """`frames` were written as `events` (one for one, in order)."""

    async def lifetime_ended(self, binding: SessionBinding, new_start: int) -> Mapping[str, str]:
        """goosed restarted: a new lifetime of the session begins after seq `new_start`. The
        runs that cannot go on because of it, each with why."""
