"""`Part`: the one seam through which an optional part joins a gateway.

A part is a function of the gateway's `Services` that answers a `Part`: its routes under the
prefix (ASGI middleware below the identity stage, so every request they see has its principal,
and above the prefix's 404), its answers on the app's own paths (below that 404: the legacy
surfaces), its middleware around the wrapped app alone (an observer of the app's traffic), and
its background work (started and stopped by the lifespan, after the runs' own and before the
upstream's connections close). `build_stack` and `background_work` ask every part and name
none.

The built-in parts are `BUILT_IN_PARTS`, in that order; ``Gateway(parts=[...])`` adds others
after them, written the same way. Adding one is its own folder (its routes, its work, its
options in `GatewaySettings` if it has any) and one line here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..approvals.routes import ApprovalRoutes
from ..bindings.claims import claims_of
from ..bindings.tmux_sessions import REFRESH_INTERVAL
from ..coordination.periodic import Periodic
from ..execution.observer import ExecutionObserver, held_only
from ..execution.routes import HeartbeatRoutes
from ..http.lifespan import Work
from ..http.middleware import Middleware
from ..http.mount import Mount
from ..sockets.server import SOCKETIO_PATH
from ..streams import LegacyTaskPoll
from ..usage import UsageLedger, UsageRoutes
from .services import ApprovalParts, ExecutionParts, Services


@dataclass(frozen=True, slots=True)
class Part:
    """What one part adds to a gateway.

    :param name: how the part is named in messages.
    :param routes: its middleware serving paths under the gateway's prefix, outermost first.
    :param app_paths: its middleware answering some of the wrapped app's own paths instead of
        the app, outermost first.
    :param app_middleware: its middleware around the wrapped app alone, outermost first,
        below the ones given as ``Gateway(app_middleware=...)``.
    :param work: its background work, started in this order and stopped in it too.
    """

    name: str
    routes: Sequence[Middleware] = ()
    app_paths: Sequence[Middleware] = ()
    app_middleware: Sequence[Middleware] = ()
    work: Sequence[Work] = ()


PartFactory = Callable[[Services], Part]


def usage(services: Services) -> Part:
    """The caller's usage totals (``{prefix}/usage``, and the app's usage path if taken)."""
    routes = Middleware(
        UsageRoutes,
        # Read only: the usage_ledger plugin writes its own.
        ledger=UsageLedger(services.log),
        prefix=services.prefix,
        legacy_path=services.legacy.usage,
    )
    return Part("usage", routes=[routes])


def execution(services: Services) -> Part:
    """Execution states and heartbeat decisions: the heartbeat routes, the observer of the
    wrapped app's requests (unless `ExecutionSettings.observe` is off), the bindings' refresh
    and the pruning of what is old."""
    parts = services.execution
    observer = []
    if parts.recorder is not None:
        # Below the app middleware given: it sees the app's answers as they leave it.
        observer.append(
            Middleware(
                ExecutionObserver,
                recorder=parts.recorder,
                resolve=held_only(services.plugins.resolve_tmux_session, claims_of(services.log)),
            )
        )
    return Part(
        "execution",
        routes=[Middleware(HeartbeatRoutes, decider=parts.decider, prefix=services.prefix)],
        app_middleware=observer,
        work=execution_work(parts),
    )


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


def approvals(services: Services) -> Part:
    """The approvals goose waits for: their routes (a 501 without an upstream), the app's
    pending-approvals path if taken, and their sweep and deliveries."""
    parts, http = services.approvals, services.settings.http
    routes = Middleware(
        ApprovalRoutes,
        approvals=None if parts is None else parts.service,
        plugins=services.plugins,
        prefix=services.prefix,
        max_body_bytes=http.max_body_bytes,
        body_timeout=http.body_timeout,
        legacy_path=services.legacy.approvals,
    )
    return Part("approvals", routes=[routes], work=[] if parts is None else [approval_work(parts)])


def approval_work(approvals: ApprovalParts) -> Work:
    service, delivery = approvals.service, approvals.delivery
    sweeping = Periodic(service.sweep, service.settings.sweep_interval, "approvals sweep")

    async def start() -> None:
        sweeping.start()

    async def stop() -> None:
        await sweeping.stop()
        await delivery.stop()

    return Work("approvals", start, stop)


def legacy_surfaces(services: Services) -> Part:
    """The app's own paths answered from the gateway's state (`LegacySurfaces`): its Socket.IO
    path and its task poll. The usage, socket-token and approvals paths are answered by the
    parts they belong to."""
    legacy, prefix = services.legacy, services.prefix
    answers = []
    if legacy.socketio is not None:
        # Long polls held in the wrapped app would each hold one of its threads.
        answers.append(
            Middleware(
                Mount,
                path=legacy.socketio,
                mounted=services.socketio,
                as_path=prefix + SOCKETIO_PATH,
            )
        )
    if legacy.tasks is not None:
        answers.append(
            Middleware(
                LegacyTaskPoll,
                service=services.streams,
                plugins=services.plugins,
                path=legacy.tasks,
                shape=legacy.task_shape,
            )
        )
    return Part("legacy surfaces", app_paths=answers)


BUILT_IN_PARTS: tuple[PartFactory, ...] = (usage, execution, approvals, legacy_surfaces)


def build_parts(services: Services, extra: Sequence[PartFactory] = ()) -> list[Part]:
    """The built-in parts, then `extra`, each made from the services."""
    return [factory(services) for factory in (*BUILT_IN_PARTS, *extra)]
