"""The first step of composing a `Gateway`: building the services its parts share.

Everything is built here, once, and handed to the parts that use it: one `Plugins`, one
`StreamService`, one `RunStore` and one `RunLifecycle` shared by the run service and the pumps
(so a run's end is decided under one per-run lock), one Socket.IO server. No part builds a
collaborator of its own when it is part of a gateway.
"""

from __future__ import annotations

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
from ..bindings.claims import claims_of
from ..bindings.tmux_sessions import TmuxBindings, bindings_of
from ..execution.decider import HeartbeatDecider
from ..execution.observer import ExecutionObserver, held_only
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
from ..runs.lifecycle_settings import LifecycleSettings, with_limits
from ..runs.service import RunService
from ..runs.store import RunStore
from ..settings import GatewaySettings
from ..sockets import SocketServer
from ..streams import StreamOptions, StreamService
from ..types import ASGIApp
from ..upstream.goose import GooseUpstream
from ..upstream.pump import PumpSettings
from ..upstream.pumps import PumpManager
from ..usage import UsageLedger
from ..wrapped import WrappedApp

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
    pumps: PumpManager
    service: RunService
    upstream: GooseUpstream


@dataclass(slots=True)
class ApprovalParts:
    """What approvals are made of; only with an upstream, whose pumps see goose ask."""

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
    usage: UsageLedger  # read by the usage routes; the usage_ledger plugin writes its own
    execution: ExecutionParts
    approvals: ApprovalParts | None = None
    app_middleware: list[Middleware] = field(default_factory=list)


def build_plugins(
    plugins: Sequence[object],
    *,
    log: EventLog,
    app: object | None,
    settings: GatewaySettings,
    config: Mapping[str, Mapping[str, Any]] | None,
    load_entry_points: bool,
    block: Iterable[str],
) -> Plugins:
    return Plugins(
        plugins,
        config=config,
        load_entry_points=load_entry_points,
        block=block,
        timeout=settings.plugin_timeout,
        context=PluginContext(log=log, app=app, prefix=settings.prefix),
        hung_limit=settings.plugin_hung_limit,
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
    upstream: GooseUpstream,
    plugins: Plugins,
    settings: GatewaySettings,
    pump_settings: PumpSettings | None,
    lifecycle_settings: LifecycleSettings | None,
    approvals: ApprovalService | None = None,
) -> RunParts:
    store = RunStore(log)
    lifecycle = RunLifecycle(
        log=log,
        store=store,
        upstream=upstream,
        plugins=plugins,
        settings=with_limits(
            lifecycle_settings,
            reply_timeout=settings.reply_timeout,
            cancel_deadline=settings.cancel_deadline,
            max_run_duration=settings.max_run_duration,
        ),
        working_dir=settings.working_dir,
    )
    pumps = PumpManager(
        log=log,
        store=store,
        upstream=upstream,
        settings=pump_settings,
        scan_interval=settings.pump_scan_interval,
        lifecycle=lifecycle,
        watcher=None if approvals is None else ApprovalWatch(approvals),
    )
    service = RunService(
        log=log,
        store=store,
        upstream=upstream,
        pumps=pumps,
        lifecycle=lifecycle,
        working_dir=settings.working_dir,
    )
    return RunParts(store, lifecycle, pumps, service, upstream)


def build_services(
    app: object | None,
    *,
    log: EventLog,
    upstream: GooseUpstream | None,
    plugins: Plugins,
    settings: GatewaySettings,
    pump_settings: PumpSettings | None = None,
    lifecycle_settings: LifecycleSettings | None = None,
    socketio: ASGIApp | None = None,
    wsgi: bool | None = None,
    app_middleware: Sequence[Iterable[Any]] = (),
    execution_settings: ExecutionSettings | None = None,
    observe_execution: bool = True,
    approval_settings: ApprovalSettings | None = None,
) -> Services:
    # One view of the credentials per log in a process, shared by every part that checks.
    credentials = credentials_of(log)
    credentials.configure(
        interval=settings.credential_refresh_interval,
        stale_after=settings.credential_stale_after,
    )
    wrapped = WrappedApp(
        app,
        wsgi=wsgi,
        wsgi_workers=settings.wsgi_workers,
        max_body_bytes=settings.max_body_bytes,
        body_timeout=settings.body_timeout,
        send_timeout=settings.send_timeout,
    )
    count, window = settings.ticket_rate
    tickets = SocketTickets(log, ttl=settings.ticket_ttl, rate=count, rate_window=window)
    streams = StreamService(
        log,
        StreamOptions(
            ping_interval=settings.ping_interval,
            send_timeout=settings.send_timeout,
            queue_size=settings.queue_size,
            max_page_bytes=settings.max_page_bytes,
        ),
        # A stream ends with the credential that opened it, in every process.
        credentials=credentials,
    )
    runs = approvals = None
    if upstream is not None:
        approvals = build_approvals(log, upstream, settings, approval_settings)
        runs = build_runs(
            log, upstream, plugins, settings, pump_settings, lifecycle_settings, approvals.service
        )
    # Read once: the identity stage and the Socket.IO server share the cookie resolver's.
    logins = cookie_logins(plugins)
    sockets = None
    if socketio is None:
        sockets = SocketServer(
            log=log,
            plugins=plugins,
            streams=streams,
            tickets=tickets,
            prefix=settings.prefix,
            origins=settings.socket_origins,
            redis_url=settings.socketio_redis_url,
            redis_channel=settings.socketio_redis_channel,
            # The cookie resolver's own record: a logout it notes closes sockets at once.
            ended_logins=None if logins is None else logins[1],
            queue_size=settings.queue_size,
            send_timeout=settings.send_timeout,
            max_page_bytes=settings.max_page_bytes,
            # Legacy clients read approvals as tool_approval_required / _resolved messages.
            extra_events=legacy_events,
        )
        socketio = sockets
    execution = build_execution(
        log,
        plugins,
        execution_settings,
        observe=observe_execution,
        work=ActiveWork(
            log,
            # Handed in: execution reads neither the run tables nor the owned runs' leases.
            active_runs=[RunStore(log).active_of_streams, LiveOwnedRuns(log).of_streams],
            pending_approvals=None if approvals is None else approvals.service.pending_of_streams,
        ),
    )
    observed = [Middleware.of(m) for m in app_middleware]
    if execution.recorder is not None:
        # Nearest the wrapped app: it sees the app's answers as they leave it.
        observed.append(
            Middleware(
                ExecutionObserver,
                recorder=execution.recorder,
                resolve=held_only(plugins.resolve_tmux_session, claims_of(log)),
            )
        )
    return Services(
        log=log,
        settings=settings,
        plugins=plugins,
        wrapped=wrapped,
        credentials=credentials,
        tickets=tickets,
        streams=streams,
        # Ends the runs the app writes itself whose process died: in every gateway process.
        sweeper=OwnedRunSweeper(log, interval=settings.owned_run_sweep_interval),
        # Held to the lifecycle's limits, so an app's runs get what the gateway's do.
        guards=RunGuards.of(plugins, lifecycle_settings or LifecycleSettings()),
        runs=runs,
        logins=logins,
        sockets=sockets,
        socketio=socketio,
        usage=UsageLedger(log),
        execution=execution,
        approvals=approvals,
        app_middleware=observed,
    )


def build_approvals(
    log: EventLog,
    upstream: GooseUpstream,
    settings: GatewaySettings,
    approval_settings: ApprovalSettings | None,
) -> ApprovalParts:
    chosen = approval_settings or ApprovalSettings(expiry=settings.approval_expiry)
    service = ApprovalService(ApprovalStore(log), chosen)
    return ApprovalParts(service, ApprovalDelivery(service, upstream))


def build_execution(
    log: EventLog,
    plugins: Plugins,
    settings: ExecutionSettings | None,
    *,
    observe: bool,
    work: ActiveWork | None = None,
) -> ExecutionParts:
    settings = settings or ExecutionSettings()
    rows = RequestRows(log, process_ttl=settings.process_ttl)
    recorder = ExecutionRecorder(rows) if observe else None
    decider = HeartbeatDecider(
        log, plugins, settings=settings, recorder=recorder, rows=rows, work=work
    )
    return ExecutionParts(recorder, decider, bindings_of(log))
