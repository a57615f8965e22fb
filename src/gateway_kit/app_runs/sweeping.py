"""`SweepOwnedRuns`: the part that keeps an `OwnedRunSweeper` running in this process.

It starts the sweeper at the lifespan start-up, and also on the first request, since some
servers run an app without a lifespan; the shutdown stops it. Requests pass through untouched.
"""

from __future__ import annotations

from ..http.lifespan import observe_lifespan
from ..log import EventLog
from ..settings import DEFAULT_OWNED_RUN_SWEEP_INTERVAL
from ..types import ASGIApp, Receive, Scope, Send
from .sweeper import OwnedRunSweeper


class SweepOwnedRuns:
    """:param log: the log whose owned runs are swept.
    :param interval: seconds between sweeps.
    :param sweeper: the sweeper to run (made here from `log` and `interval` when not given).
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        log: EventLog,
        interval: float = DEFAULT_OWNED_RUN_SWEEP_INTERVAL,
        sweeper: OwnedRunSweeper | None = None,
    ) -> None:
        self.app = app
        self.sweeper = sweeper if sweeper is not None else OwnedRunSweeper(log, interval=interval)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        sweeper = self.sweeper
        if scope["type"] == "lifespan":
            receive = observe_lifespan(receive, startup=sweeper.start, shutdown=sweeper.stop)
        else:
            await sweeper.start()  # at once when it runs already
        await self.app(scope, receive, send)
