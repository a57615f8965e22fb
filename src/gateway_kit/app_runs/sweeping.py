"""`SweepOwnedRuns`: a stack's lifespan part when its one piece of background work is the
`OwnedRunSweeper` (a stack that owns more hands them all to one `Lifespan`, as `Gateway` does).

It starts the sweeper at the lifespan start-up, and also on the first request, since some
servers run an app without a lifespan; the shutdown stops it. Requests pass through untouched.
"""

from __future__ import annotations

from ..http.lifespan import Lifespan, Work
from ..log import EventLog
from ..settings import DEFAULT_OWNED_RUN_SWEEP_INTERVAL
from ..types import ASGIApp
from .sweeper import OwnedRunSweeper


def sweeping(sweeper: OwnedRunSweeper) -> Work:
    """The sweeper as a piece of a lifespan's work."""
    return Work("owned-run sweeper", sweeper.start, sweeper.stop)


class SweepOwnedRuns(Lifespan):
    """:param log: the log whose owned runs are swept.
    :param interval: seconds between sweeps.
    :param sweeper: the sweeper to run, instead of one made from `log` and `interval`.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        log: EventLog,
        interval: float = DEFAULT_OWNED_RUN_SWEEP_INTERVAL,
        sweeper: OwnedRunSweeper | None = None,
    ) -> None:
        self.sweeper = sweeper if sweeper is not None else OwnedRunSweeper(log, interval=interval)
        super().__init__(app, work=[sweeping(self.sweeper)])
