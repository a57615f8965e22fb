"""`ActiveWork`: what keeps a tmux session busy besides its requests: the active runs of the
streams bound to it, gateway runs and runs the app writes itself, and the approvals they wait
for (a pane waiting for a human is never idle: text typed there would answer its prompt).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..app_runs.lease_names import LEASE_PREFIX, owned_run_of
from ..bindings.tmux_sessions import bindings_of
from ..coordination.tables import leases
from ..log import EventLog
from ..runs.model import RunStatus
from ..runs.tables import runs

ACTIVE_RUNS = sa.select(runs.c.run_id).where(
    runs.c.stream == sa.bindparam("stream"),
    runs.c.status == RunStatus.ACTIVE.value,
)
# Owned runs hold a lease named after their stream while their writer lives.
OWNED_RUNS = sa.select(leases.c.name).where(
    leases.c.name.startswith(LEASE_PREFIX), leases.c.expires_at >= sa.bindparam("now")
)

# Of each list of work, the items a decision's evidence names.
MAX_SHOWN = 10

# Pending approvals of some streams, by whoever keeps them: (stream, approval id) pairs.
PendingApprovals = Callable[[Sequence[str]], Sequence[tuple[str, str]]]


@dataclass(frozen=True, slots=True)
class Work:
    """A tmux session's work besides its requests, as read at one moment."""

    streams: tuple[str, ...] = ()
    active_runs: tuple[str, ...] = ()
    pending_approvals: tuple[str, ...] = ()

    @property
    def busy(self) -> bool:
        return bool(self.active_runs or self.pending_approvals)

    def as_json(self) -> dict[str, Any]:
        """What a decision records: each list cut to its first `MAX_SHOWN`, with its length
        (a decision is written at every ask, and its size must not grow with the work)."""
        return {
            "bound_streams": list(self.streams[:MAX_SHOWN]),
            "bound_stream_count": len(self.streams),
            "active_runs": list(self.active_runs[:MAX_SHOWN]),
            "active_run_count": len(self.active_runs),
            "pending_approvals": list(self.pending_approvals[:MAX_SHOWN]),
            "pending_approval_count": len(self.pending_approvals),
        }


class ActiveWork:
    """:param pending_approvals: where pending approvals are read, once there are any."""

    def __init__(self, log: EventLog, *, pending_approvals: PendingApprovals | None = None) -> None:
        self.log = log
        self.bindings = bindings_of(log)
        self.pending_approvals = pending_approvals

    def of(self, tmux_session: str) -> Work:
        """The work of `tmux_session` now (blocking: call it in a worker thread)."""
        streams = self.bindings.streams_of(tmux_session)
        if not streams:
            return Work()
        tables = self.log.tables
        active = [
            row.run_id
            for stream in streams
            for row in tables.select(ACTIVE_RUNS, {"stream": stream})
        ]
        bound = set(streams)
        for row in tables.select(OWNED_RUNS, {"now": time.time()}):
            owned = owned_run_of(row.name)
            if owned is not None and owned[0] in bound:
                active.append(owned[1])
        approvals: list[str] = []
        if self.pending_approvals is not None:
            approvals = [approval for _, approval in self.pending_approvals(streams)]
        return Work(tuple(streams), tuple(sorted(active)), tuple(approvals))
