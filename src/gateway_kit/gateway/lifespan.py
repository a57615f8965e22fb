"""What a gateway's lifespan part starts and stops: every piece of its background work.

In the order the parts used to act on the lifespan, which is also the order of the shutdown:
the owned-run sweeper, the streams (closed first of what clients hold, so a server's shutdown
is not kept waiting by them), the session pumps, the run lifecycle (its billing outbox and
deadlines), each part's own work (`Part.work`: the approvals' deliveries, the execution
state, ...), the upstream's connections (after the parts: approvals are delivered through
them), and the Socket.IO server (its presence checks, rooms and connections). The credential
view starts with the lifespan too; without one it starts when a credential is first checked.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..http.lifespan import Work, nothing
from ..identity.credentials import CredentialView
from .parts import Part
from .services import Services


def credential_refresh(view: CredentialView) -> Work:
    async def start() -> None:
        view.start()  # its reading thread, unless it runs already

    # Shared by every gateway of the log in this process: a daemon thread nobody stops.
    return Work("credential view", start, on_request=False)


def background_work(services: Services, parts: Sequence[Part] = ()) -> list[Work]:
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
    for part in parts:
        work += part.work
    if runs is not None:
        work.append(Work("upstream connections", nothing, runs.upstream.aclose))
    sockets = services.sockets
    if sockets is not None:
        # Its presence checks run with a lifespan only, as they always have.
        work.append(Work("Socket.IO server", sockets.startup, sockets.shutdown, on_request=False))
    return work
