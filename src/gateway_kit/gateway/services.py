"""The first step of composing a `Gateway`: building the services its parts share.

Everything is built here, once, and handed to the parts that use it: one `Plugins`, one
`StreamService`, one `RunStore` and one `RunLifecycle` shared by the run service and the pumps
(so a run's end is decided under one per-run lock), one Socket.IO server. No part builds a
collaborator of its own when it is part of a gateway. Each service is tuned by its part's
options in `GatewaySettings`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..app_runs.guards import RunGuards
from ..app_runs.live import LiveOwnedRuns
from ..app_runs.sweeper import OwnedRunSweeper
from ..approvals.delivery import ApprovalDelivery
from ..approvals.legacy import legacy_events
from ..approvals.service import ApprovalService
from ..approvals.settings import ApprovalSettings
from ..approvals.store import ApprovalStore
from ..approvals.watch import ApprovalWatch
from ..bindings.tmux_sessions import TmuxBindings, bindings_of
from ..execution.decider import HeartbeatDecider
from ..execution.recorder import ExecutionRecorder
from ..execution.request_rows import RequestRows
from ..execution.settings import ExecutionSettings
from ..execution.work import ActiveWork
from ..hooks import PluginContext, Plugins
from ..http.middleware import Middleware
from ..identity.credentials import CredentialView, credentials_of
from ..identity.flask_session import FlaskSessionReader
from ..identity.logins import EndedLogins
from ..identity.tickets import SocketTickets
from ..log import EventLog
from ..runs.lifecycle import RunLifecycle
from ..runs.ports import Pumps, Upstream
from ..runs.service import RunService
from ..runs.store import RunStore
from ..sockets import SocketServer
from ..streams import StreamOptions, StreamService
from ..types import ASGIApp
from ..upstream.adapter import PumpParts, UpstreamAdapter
from ..wrapped import WrappedApp
from .adapters import AnyUpstream, adapter_of
from .legacy import LegacySurfaces
from .settings import GatewaySettings

logger = logging.getLogger(__name__)

BAD_COOKIE_LOGINS = (
    "cookie_logins answered %r, not (a FlaskSessionReader, an EndedLogins); logouts of the "
    "wrapped app are not watched"
)

CookieLogins = tuple[FlaskSessionReader, EndedLogins]


@dataclass(slots=True)
class RunParts:
    """What runs the gateway owns are made of; only with an upstream."""

    store: RunStore
    lifecycle: RunLifecycle
    pumps: Pumps
    service: RunService
    upstream: Upstream  # the adapter's port: what runs talk to


@dataclass(slots=True)
class ApprovalParts:
    """What approvals are made of; only with an upstream, whose pumps see the agent ask."""

    service: ApprovalService
    delivery: ApprovalDelivery


@dataclass(slots=True)
class ExecutionParts:
    """What the execution state is made of: this process's recorder of observed requests
    (None when the wrapped app is not observed), the decider, the stream bindings."""

    recorder: ExecutionRecorder | None
    decider: HeartbeatDecider
    bindings: TmuxBindings


@dataclass(slots=True)
class Services:
    """Every service of one gateway, as the stack's parts and its lifespan are handed them."""

    log: EventLog
    settings: GatewaySettings
    prefix: str
    legacy: LegacySurfaces
    plugins: Plugins
    wrapped: WrappedApp
    credentials: CredentialView
    tickets: SocketTickets
    streams: StreamService
    sweeper: OwnedRunSweeper
    guards: RunGuards  # the finish guards of the runs the app writes (`owned_run`)
    runs: RunParts | None
    logins: CookieLogins | None
    sockets: SocketServer | None
    socketio: ASGIApp  # the gateway's Socket.IO server, or the application given instead
    execution: ExecutionParts
    approvals: ApprovalParts | None = None
    # Around the wrapped app alone, outermost first, as given (the parts add their own).
    app_middleware: list[Middleware] = field(default_factory=list)


def build_plugins(
    plugins: Sequence[object],
    *,
    log: EventLog,
    app: object | None,
    settings: GatewaySettings,
    prefix: str,
    config: Mapping[str, Mapping[str, Any]] | None,
    load_entry_points: bool,
    block: Iterable[str],
) -> Plugins:
    return Plugins(
        plugins,
        config=config,
        load_entry_points=load_entry_points,
        block=block,
        timeout=settings.plugins.timeout,
        context=PluginContext(log=log, app=app, prefix=prefix),
        hung_limit=settings.plugins.hung_limit,
    )


def cookie_logins(plugins: Plugins) -> CookieLogins | None:
    """How a cookie resolver reads the wrapped Flask app's logins, as its `cookie_logins` hook
    answers; None when no plugin reads them (logouts are then not watched)."""
    answer = plugins.hook.cookie_logins()
    if answer is None:
        return None
    reader, ended = answer
    if isinstance(reader, FlaskSessionReader) and isinstance(ended, EndedLogins):
        return reader, ended
    logger.error(BAD_COOKIE_LOGINS, answer)
    return None


def build_runs(
    log: EventLog,
    adapter: UpstreamAdapter,
    plugins: Plugins,
    settings: GatewaySettings,
    approvals: ApprovalService | None = None,
) -> RunParts:
    store = RunStore(log)
    upstream = adapter.port
    lifecycle = RunLifecycle(
        log=log,
        store=store,
        upstream=upstream,
        plugins=plugins,
        settings=settings.lifecycle,
        working_dir=settings.runs.working_dir,
    )
    pumps = adapter.pumps(
        PumpParts(
            log=log,
            store=store,
            lifecycle=lifecycle,
            settings=settings.pumps,
            watcher=None if approvals is None else ApprovalWatch(approvals),
        )
    )
    service = RunService(
        log=log,
        store=store,
        upstream=upstream,
        pumps=pumps,
        lifecycle=lifecycle,
        working_dir=settings.runs.working_dir,
    )
    return RunParts(store, lifecycle, pumps, service, upstream)


def build_services(
    app: object | None,
    *,
    log: EventLog,
    upstream: AnyUpstream | None,
    plugins: Plugins,
    settings: GatewaySettings,
    prefix: str,
    approval_expiry: float,
    legacy: LegacySurfaces,
    socketio: ASGIApp | None = None,
    wsgi: bool | None = None,
    app_middleware: Sequence[Iterable[Any]] = (),
) -> Services:
    http, identity = settings.http, settings.identity
    # One view of the credentials per log in a process, shared by every part that checks.
    credentials = credentials_of(log)
    credentials.configure(
        interval=identity.credential_refresh_interval,
        stale_after=identity.credential_stale_after,
    )
    wrapped = WrappedApp(
        app,
        wsgi=wsgi,
        wsgi_workers=http.wsgi_workers,
        max_body_bytes=http.max_body_bytes,
        body_timeout=http.body_timeout,
        send_timeout=http.send_timeout,
    )
    count, window = identity.ticket_rate
    tickets = SocketTickets(log, ttl=identity.ticket_ttl, rate=count, rate_window=window)
    streams = StreamService(
        log,
        StreamOptions(
            ping_interval=settings.streams.ping_interval,
            send_timeout=http.send_timeout,
            queue_size=settings.streams.queue_size,
            max_page_bytes=settings.streams.max_page_bytes,
        ),
        # A stream ends with the credential that opened it, in every process.
        credentials=credentials,
    )
    runs = approvals = None
    if upstream is not None:
        # The adapter of the upstream given: its port, its pumps, its approval answers.
        adapter = adapter_of(upstream)
        approvals = build_approvals(
            log, adapter, dataclasses.replace(settings.approvals, expiry=approval_expiry)
        )
        runs = build_runs(log, adapter, plugins, settings, approvals.service)
    # Read once: the identity stage and the Socket.IO server share the cookie resolver's.
    logins = cookie_logins(plugins)
    sockets = None
    if socketio is None:
        sockets = SocketServer(
            log=log,
            plugins=plugins,
            streams=streams,
            tickets=tickets,
            prefix=prefix,
            origins=settings.sockets.origins,
            redis_url=settings.sockets.redis_url,
            redis_channel=settings.sockets.redis_channel,
            # The cookie resolver's own record: a logout it notes closes sockets at once.
            ended_logins=None if logins is None else logins[1],
            queue_size=settings.streams.queue_size,
            send_timeout=http.send_timeout,
            max_page_bytes=settings.streams.max_page_bytes,
            # Legacy clients read approvals as tool_approval_required / _resolved messages.
            extra_events=legacy_events,
        )
        socketio = sockets
    execution = build_execution(
        log,
        plugins,
        settings.execution,
        work=ActiveWork(
            log,
            # Handed in: execution reads neither the run tables nor the owned runs' leases.
            active_runs=[RunStore(log).active_of_streams, LiveOwnedRuns(log).of_streams],
            pending_approvals=None if approvals is None else approvals.service.pending_of_streams,
        ),
    )
    return Services(
        log=log,
        settings=settings,
        prefix=prefix,
        legacy=legacy,
        plugins=plugins,
        wrapped=wrapped,
        credentials=credentials,
        tickets=tickets,
        streams=streams,
        # Ends the runs the app writes itself whose process died: in every gateway process.
        sweeper=OwnedRunSweeper(log, interval=settings.app_runs.sweep_interval),
        # Held to the lifecycle's limits, so an app's runs get what the gateway's do.
        guards=RunGuards.of(plugins, settings.lifecycle),
        runs=runs,
        logins=logins,
        sockets=sockets,
        socketio=socketio,
        execution=execution,
        approvals=approvals,
        app_middleware=[Middleware.of(m) for m in app_middleware],
    )


def build_approvals(
    log: EventLog, adapter: UpstreamAdapter, settings: ApprovalSettings
) -> ApprovalParts:
    service = ApprovalService(ApprovalStore(log), settings)
    return ApprovalParts(service, ApprovalDelivery(service, adapter.answers))


def build_execution(
    log: EventLog,
    plugins: Plugins,
    settings: ExecutionSettings,
    *,
    work: ActiveWork | None = None,
) -> ExecutionParts:
    rows = RequestRows(log, process_ttl=settings.process_ttl)
    recorder = ExecutionRecorder(rows) if settings.observe else None
    decider = HeartbeatDecider(
        log, plugins, settings=settings, recorder=recorder, rows=rows, work=work
    )
    return ExecutionParts(recorder, decider, bindings_of(log))
