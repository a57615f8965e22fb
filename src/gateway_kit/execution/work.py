"""`ActiveWork`: what keeps a tmux session busy besides its requests: the active runs of the
streams bound to it, gateway runs and runs the app writes itself, and the approvals they wait
for (a pane waiting for a human is never idle: text typed there would answer its prompt).

Execution keeps none of these facts: whoever keeps them hands in how to read them (the run
store, the owned runs' leases, the approval service), as the composition of a gateway does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..bindings.tmux_sessions import bindings_of
from ..log import EventLog

# Of each list of work, the items a decision's evidence names.
MAX_SHOWN = 10

# The active runs of some streams, by whoever keeps them: (stream, run id) pairs.
ActiveRuns = Callable[[Sequence[str]], Sequence[tuple[str, str]]]
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
    """:param log: the log whose bindings say which streams a tmux session drives.
    :param active_runs: where active runs are read, each kind from its keeper (the gateway's
        runs, the runs the app writes itself); none, and no run keeps a session busy.
    :param pending_approvals: where pending approvals are read, once there are any.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        active_runs: Iterable[ActiveRuns] = (),
        pending_approvals: PendingApprovals | None = None,
    ) -> None:
        self.bindings = bindings_of(log)
        self.active_runs = tuple(active_runs)
        self.pending_approvals = pending_approvals

    def of(self, tmux_session: str) -> Work:
        """The work of `tmux_session` now (blocking: call it in a worker thread)."""
        streams = self.bindings.streams_of(tmux_session)
        if not streams:
            return Work()
        active = [run for source in self.active_runs for _, run in source(streams)]
        approvals: list[str] = []
        if self.pending_approvals is not None:
            approvals = [approval for _, approval in self.pending_approvals(streams)]
        return Work(tuple(streams), tuple(sorted(active)), tuple(approvals))
