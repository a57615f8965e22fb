"""What a gateway's lifespan part starts and stops: every piece of its background work.

In the order the parts used to act on the lifespan, which is also the order of the shutdown:
the owned-run sweeper, the streams (closed first of what clients hold, so a server's shutdown
is not kept waiting by them), the session pumps, the run lifecycle (its billing outbox and
deadlines), the upstream's connections, and the Socket.IO server (its presence checks, rooms
and connections). The credential view starts with the lifespan too; without one it starts
when a credential is first checked.
"""

from __future__ import annotations

import asyncio

from ..bindings.tmux_sessions import REFRESH_INTERVAL
from ..coordination.periodic import Periodic
from ..http.lifespan import Work, nothing
from ..identity.credentials import CredentialView
from .services import ApprovalParts, ExecutionParts, Services


def credential_refresh(view: CredentialView) -> Work:
    async def start() -> None:
        view.start()  # its reading thread, unless it runs already

    # Shared by every gateway of the log in this process: a daemon thread nobody stops.
    return Work("credential view", start, on_request=False)


def execution_work(execution: ExecutionParts) -> list[Work]:
    bindings, decider = execution.bindings, execution.decider

    async def refresh() -> None:
        await asyncio.to_thread(bindings.refresh)

    refreshing = Periodic(refresh, REFRESH_INTERVAL, "tmux bindings refresh")
    pruning = Periodic(decider.prune, decider.settings.prune_interval, "execution state pruning")

    async def start() -> None:
        refreshing.start()
        pruning.start()

    async def stop() -> None:
        await refreshing.stop()
        await pruning.stop()

    work = [Work("execution state", start, stop)]
    recorder = execution.recorder
    if recorder is not None:
        work.append(Work("execution recorder", recorder.start, recorder.stop))
    return work


def approval_work(approvals: ApprovalParts) -> Work:
    service, delivery = approvals.service, approvals.delivery
    sweeping = Periodic(service.sweep, service.settings.sweep_interval, "approvals sweep")

    async def start() -> None:
        sweeping.start()

    async def stop() -> None:
        await sweeping.stop()
        await delivery.stop()

    return Work("approvals", start, stop)


def background_work(services: Services) -> list[Work]:
    sweeper, streams = services.sweeper, services.streams
    work = [
        credential_refresh(services.credentials),
        Work("owned-run sweeper", sweeper.start, sweeper.stop),
        # Reopened by a start-up only: a request must not undo `Gateway.close_streams`.
        Work("streams", streams.startup, streams.shutdown, on_request=False),
    ]
    runs = services.runs
    if runs is not None:
        work += [
            Work("session pumps", runs.pumps.start, runs.pumps.stop),
            Work("run lifecycle", runs.lifecycle.start, runs.lifecycle.stop),
        ]
        if services.approvals is not None:
            work.append(approval_work(services.approvals))
        # Last of the runs' work: the approvals' deliveries use the connections.
        work.append(Work("upstream connections", nothing, runs.upstream.aclose))
    work += execution_work(services.execution)
    sockets = services.sockets
    if sockets is not None:
        # Its presence checks run with a lifespan only, as they always have.
        work.append(Work("Socket.IO server", sockets.startup, sockets.shutdown, on_request=False))
    return work
