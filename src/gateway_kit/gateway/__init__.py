"""`Gateway`: the ASGI application, a stack of small parts around the wrapped app.

It is composed in two visible steps: `services.build_services` builds what the parts share
(the plugins, the stream service, the run store, lifecycle, pumps and service, the Socket.IO
server, ...), and `stack.build_stack` orders the parts, the lifespan part at the top starting
and stopping every piece of background work (`lifespan.background_work`). `Gateway` adds
nothing of its own, and each part is a middleware usable alone around any ASGI app.

Longer than most modules for one reason: `Gateway`'s docstring documents every setting.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..approvals.settings import ApprovalSettings
from ..exceptions import SettingsError
from ..execution.settings import ExecutionSettings
from ..log import EventLog
from ..runs.lifecycle_settings import LifecycleSettings
from ..settings import (
    DEFAULT_APPROVAL_EXPIRY,
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_CREDENTIAL_REFRESH_INTERVAL,
    DEFAULT_CREDENTIAL_STALE_AFTER,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    DEFAULT_MAX_PAGE_BYTES,
    DEFAULT_OWNED_RUN_SWEEP_INTERVAL,
    DEFAULT_PING_INTERVAL,
    DEFAULT_PLUGIN_HUNG_LIMIT,
    DEFAULT_PLUGIN_TIMEOUT,
    DEFAULT_PREFIX,
    DEFAULT_PUMP_SCAN_INTERVAL,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_REDIS_CHANNEL,
    DEFAULT_SEND_TIMEOUT,
    DEFAULT_TICKET_RATE,
    DEFAULT_TICKET_TTL,
    DEFAULT_WORKING_DIR,
    DEFAULT_WSGI_WORKERS,
    GatewaySettings,
)
from ..types import ASGIApp, Receive, Scope, Send
from ..upstream.goose import GooseUpstream
from ..upstream.pump import PumpSettings
from ..wrapped import is_wsgi
from .legacy import LegacySurfaces
from .services import CookieLogins, build_plugins, build_services, cookie_logins
from .stack import SOCKETIO_PATH, build_stack

logger = logging.getLogger(__name__)

ANONYMOUS_WARNING = (
    "allow_anonymous=True: requests without credentials are served as 'anonymous', allowed "
    "everything. Use this for demos and tests only."
)

__all__ = ["SOCKETIO_PATH", "Gateway", "LegacySurfaces", "is_wsgi"]

LEGACY_TWICE = (
    "the legacy surfaces are given two ways: legacy=LegacySurfaces(...) and {names}; "
    "give them in legacy= alone"
)


class Gateway:
    """The ASGI application: the gateway's routes under `prefix`, the wrapped app elsewhere.

    :param app: the application to wrap: WSGI (a Flask app, mounted through `a2wsgi`) or ASGI;
        None serves only the gateway's own routes.
    :param log: the `EventLog` every stream is read from.
    :param upstream: the `GooseUpstream` runs go to; without one, starting a run is a 501.
    :param plugins: plugin modules or objects, registered after the installed ones.
    :param prefix: where the gateway's own routes live.
    :param allow_anonymous: serve requests without credentials as ``anonymous``, who may read
        every stream (and log a warning at start-up). By default every gateway route, and the
        legacy task poll, needs a principal (401 otherwise).
    :param plugin_config: settings per plugin name, handed to each plugin's `configure_plugin`
        (a name no loaded plugin has is an error).
    :param load_entry_points: also load plugins of other installed distributions (the
        ``gateway_kit`` entry-point group); the built-ins load either way.
    :param block_plugins: names of plugins not to load, built-ins included.
    :param plugin_timeout: seconds an access decision of a plugin may take before it counts as
        a refusal.
    :param socketio: an ASGI application to serve at ``{prefix}/socket.io`` (HTTP and
        websocket requests, their paths unchanged) instead of the gateway's own Socket.IO
        server (`gateway_kit.sockets.SocketServer`).
    :param socket_origins: the browser origins allowed to open a Socket.IO connection; None
        allows the gateway's own origin only.
    :param socketio_redis_url: a Redis server through which several gateway processes share
        Socket.IO's state (python-socketio's Redis manager); None for one process.
    :param socketio_redis_channel: the Redis channel those processes share (one per
        deployment on a shared Redis).
    :param credential_refresh_interval: seconds between each process's reads of revoked tokens
        and ended logins (only what changed): how soon a revocation or a logout anywhere ends
        the credential's requests, streams and sockets here.
    :param credential_stale_after: seconds this process may go without such a read (the
        database is down) before every token and cookie check fails closed
        (`DatabaseUnavailable`, a 503).
    :param ticket_ttl: seconds a socket ticket stays valid.
    :param ticket_rate: how many tickets one credential may ask for in how many seconds
        (a 429 with ``Retry-After`` beyond).
    :param legacy: which of the app's own paths the gateway answers instead of the app
        (`LegacySurfaces`: the task poll in the app's shape, usage, socket token, approvals
        list, Socket.IO); None: none, every request outside `prefix` is the app's, answered as
        without the gateway. Each is logged at start-up.
    :param legacy_socket_token_path: `legacy`'s ``socket_token``, given alone.
    :param legacy_usage_path: `legacy`'s ``usage``, given alone.
    :param app_middleware: middleware around the wrapped app only (an observer of its
        traffic), outermost first: `Middleware` objects or anything iterable as ``(cls, args,
        kwargs)``, such as Starlette's.
    :param wsgi: whether `app` is WSGI; None guesses (a Flask app, an ``async def __call__``,
        the number of parameters) and raises `TypeError` when it cannot tell.
    :param wsgi_workers: threads serving the WSGI app; each request holds one while it runs.
    :param ping_interval: seconds between ``: ping`` comments on an SSE stream.
    :param send_timeout: seconds one write to a client may take before it is disconnected
        (noticed within a quarter of that again); for a Socket.IO connection, seconds it may
        take to send what it holds (a page and `queue_size` at most); for a WSGI app's answer,
        seconds one write may take before the rest is dropped, so that its thread finishes.
    :param queue_size: live events one SSE client may have waiting before it is disconnected
        (it then resumes by cursor; the others never wait for it); messages one Socket.IO
        connection may have waiting before it leaves its rooms, to catch up from the log once
        its client has read them (a replay, too, sends a page and waits for it to be read).
    :param max_body_bytes: the largest request body the gateway's routes accept (413 above it),
        and the wrapped WSGI app is handed.
    :param max_page_bytes: how much of events' data (bytes of their JSON) one JSON page, legacy
        poll answer, SSE replay chunk or Socket.IO replay page holds at most, besides one event
        (a page always holds one, so a cursor always moves on); the client continues from the
        page's cursor. Besides `queue_size`, what bounds the server's memory per client.
    :param max_message_bytes: the largest message (UTF-8) a run may be started with (413 above
        it, nothing written).
    :param legacy_tasks_path: `legacy`'s ``tasks``, given alone (the example app's shape).
    :param pump_settings: timings of the session pumps (`gateway_kit.upstream.pump`).
    :param lifecycle_settings: how runs end (`gateway_kit.runs.lifecycle`): how many follow-up
        turns finish guards may ask for (2 by default), how long a lifecycle hook may take,
        and the billing outbox's timings. The runs the app writes are held to the same
        guards and limits: ``owned_run(log, ..., guards=gateway.run_guards)``.
    :param pump_scan_interval: how often this process looks for sessions nobody pumps (their
        process died) and takes them over.
    :param owned_run_sweep_interval: how often this process looks for runs the app writes
        itself (`owned_run`) whose process died, and ends them with an `Error`.
    :param working_dir: the working directory of the goose sessions this gateway starts.
    :param reply_timeout: seconds goose may take to answer a run's `reply` (15 by default; it
        answers at once and works in the background): a start past it is a 504 and its run
        ends failed.
    :param cancel_deadline: seconds goose's `Finish` may take after a cancel (30 by default);
        then the gateway ends the run as cancelled itself, and the stream takes a new run.
    :param max_run_duration: seconds a run may go on (3600 by default, ``float("inf")`` for
        no limit); then the gateway cancels goose's request and ends the run with an `Error`.
        These three, when given, take the place of `lifecycle_settings`' own; both deadlines
        are measured from the times in the database, so they hold across restarts.
    :param plugin_hung_limit: calls one plugin may have hung (past their timeout, still
        running in their threads) before it is no longer asked: its hooks then answer their
        failure value at once (a refusal, a guard that failed, a bill delivered later), logged
        with its name, until one of those calls returns. Other plugins are asked as before.
    :param body_timeout: seconds a client may take to send a request body, to the gateway's
        routes or the wrapped WSGI app (a 408 after it). A WSGI app gets a request once its
        body is read, within `max_body_bytes`, so that slow clients hold none of its threads.
    :param execution_settings: the timings of execution states and heartbeat decisions
        (`gateway_kit.execution.settings.ExecutionSettings`: response timeout 120 s, grace
        5 s, how long the fallback plugins may take, how long decisions are kept).
    :param observe_execution: observe the wrapped app's requests per tmux session (the
        `resolve_tmux_session` hook says whose); False leaves them unobserved, and every
        session's state then comes from its runs alone, or the fallback.
    :param legacy_socketio_path: `legacy`'s ``socketio``, given alone.
    :param approval_expiry: seconds a pending approval waits for a decision; then it is
        denied, and goose is told so (an elicitation waits at most goose's own 300 s).
    :param approval_settings: every timing of approvals
        (`gateway_kit.approvals.settings.ApprovalSettings`), ``approval_expiry`` included.
    :param legacy_approvals_path: `legacy`'s ``approvals``, given alone.
    """

    def __init__(
        self,
        app: object | None = None,
        *,
        log: EventLog,
        upstream: GooseUpstream | None = None,
        plugins: Sequence[object] = (),
        prefix: str = DEFAULT_PREFIX,
        allow_anonymous: bool = False,
        plugin_config: Mapping[str, Mapping[str, Any]] | None = None,
        load_entry_points: bool = True,
        block_plugins: Iterable[str] = (),
        plugin_timeout: float = DEFAULT_PLUGIN_TIMEOUT,
        socketio: ASGIApp | None = None,
        socket_origins: Sequence[str] | None = None,
        socketio_redis_url: str | None = None,
        socketio_redis_channel: str = DEFAULT_REDIS_CHANNEL,
        credential_refresh_interval: float = DEFAULT_CREDENTIAL_REFRESH_INTERVAL,
        credential_stale_after: float = DEFAULT_CREDENTIAL_STALE_AFTER,
        ticket_ttl: float = DEFAULT_TICKET_TTL,
        ticket_rate: tuple[int, float] = DEFAULT_TICKET_RATE,
        legacy_socket_token_path: str | None = None,
        legacy_usage_path: str | None = None,
        app_middleware: Sequence[Iterable[Any]] = (),
        wsgi: bool | None = None,
        wsgi_workers: int = DEFAULT_WSGI_WORKERS,
        ping_interval: float = DEFAULT_PING_INTERVAL,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        legacy_tasks_path: str | None = None,
        pump_settings: PumpSettings | None = None,
        lifecycle_settings: LifecycleSettings | None = None,
        pump_scan_interval: float = DEFAULT_PUMP_SCAN_INTERVAL,
        owned_run_sweep_interval: float = DEFAULT_OWNED_RUN_SWEEP_INTERVAL,
        working_dir: str = DEFAULT_WORKING_DIR,
        reply_timeout: float | None = None,
        cancel_deadline: float | None = None,
        max_run_duration: float | None = None,
        plugin_hung_limit: int = DEFAULT_PLUGIN_HUNG_LIMIT,
        body_timeout: float = DEFAULT_BODY_TIMEOUT,
        legacy_socketio_path: str | None = None,
        max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        execution_settings: ExecutionSettings | None = None,
        observe_execution: bool = True,
        approval_expiry: float = DEFAULT_APPROVAL_EXPIRY,
        approval_settings: ApprovalSettings | None = None,
        legacy_approvals_path: str | None = None,
        legacy: LegacySurfaces | None = None,
    ) -> None:
        self.legacy = legacy_surfaces(
            legacy,
            legacy_tasks_path=legacy_tasks_path,
            legacy_usage_path=legacy_usage_path,
            legacy_socket_token_path=legacy_socket_token_path,
            legacy_approvals_path=legacy_approvals_path,
            legacy_socketio_path=legacy_socketio_path,
        )
        self.settings = GatewaySettings(
            prefix=prefix,
            wsgi_workers=wsgi_workers,
            ping_interval=ping_interval,
            send_timeout=send_timeout,
            queue_size=queue_size,
            max_body_bytes=max_body_bytes,
            plugin_timeout=plugin_timeout,
            pump_scan_interval=pump_scan_interval,
            owned_run_sweep_interval=owned_run_sweep_interval,
            working_dir=working_dir,
            ticket_ttl=ticket_ttl,
            ticket_rate=ticket_rate,
            credential_refresh_interval=credential_refresh_interval,
            credential_stale_after=credential_stale_after,
            socket_origins=tuple(socket_origins) if socket_origins is not None else None,
            reply_timeout=reply_timeout,
            cancel_deadline=cancel_deadline,
            max_run_duration=max_run_duration,
            plugin_hung_limit=plugin_hung_limit,
            body_timeout=body_timeout,
            max_page_bytes=max_page_bytes,
            max_message_bytes=max_message_bytes,
            socketio_redis_url=socketio_redis_url,
            socketio_redis_channel=socketio_redis_channel,
            approval_expiry=approval_expiry,
        )
        self.legacy.check_outside(self.settings.prefix)
        self.log = log
        self.upstream = upstream
        self.allow_anonymous = allow_anonymous
        self.plugins = build_plugins(
            plugins,
            log=log,
            app=app,
            settings=self.settings,
            config=plugin_config,
            load_entry_points=load_entry_points,
            block=block_plugins,
        )
        # Step one: every service, built once and shared by the parts that use it.
        self.services = services = build_services(
            app,
            log=log,
            upstream=upstream,
            plugins=self.plugins,
            settings=self.settings,
            pump_settings=pump_settings,
            lifecycle_settings=lifecycle_settings,
            socketio=socketio,
            wsgi=wsgi,
            app_middleware=app_middleware,
            execution_settings=execution_settings,
            observe_execution=observe_execution,
            approval_settings=approval_settings,
        )
        runs = services.runs
        self.wrapped = services.wrapped
        self.tickets = services.tickets
        self.app_middleware = services.app_middleware
        self.streams = services.streams
        self.sweeper = services.sweeper
        # `owned_run(log, ..., guards=gateway.run_guards)`: the app's runs get these guards.
        self.run_guards = services.guards
        self.lifecycle = None if runs is None else runs.lifecycle
        self.pumps = None if runs is None else runs.pumps
        self.runs = None if runs is None else runs.service
        self.logins = services.logins
        self.sockets = services.sockets
        self.socketio: ASGIApp = services.socketio
        # `await gateway.heartbeat.decide(tmux_session_id)`: a scheduler's Python call.
        self.heartbeat = services.execution.decider
        # The approvals goose waits for (None without an upstream): `claim`, `decide`, ...
        self.approvals = None if services.approvals is None else services.approvals.service
        # Step two: the parts, in order.
        self.stack = self.build_middleware_stack()
        if allow_anonymous:
            logger.warning(ANONYMOUS_WARNING)
        self.legacy.log_taken()

    @property
    def prefix(self) -> str:
        return self.settings.prefix

    @property
    def wsgi(self) -> bool:
        return self.wrapped.wsgi

    def build_middleware_stack(self) -> ASGIApp:
        """The parts, outermost first (`gateway_kit.gateway.stack`); a request goes down the
        list until a part serves it."""
        return build_stack(self.services, self.legacy, allow_anonymous=self.allow_anonymous)

    def cookie_logins(self) -> CookieLogins | None:
        """How the cookie resolver reads the wrapped Flask app's logins (its `cookie_logins`
        hook), so that the identity stage notices a logout; None when no resolver reads them."""
        return cookie_logins(self.plugins)

    def close_streams(self) -> None:
        """End every open stream now (clients resume by cursor) and refuse new ones until the
        next lifespan start-up. Safe from any thread; the lifespan shutdown calls it too."""
        self.streams.close_streams()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.stack(scope, receive, send)


def legacy_surfaces(
    legacy: LegacySurfaces | None,
    *,
    legacy_tasks_path: str | None,
    legacy_usage_path: str | None,
    legacy_socket_token_path: str | None,
    legacy_approvals_path: str | None,
    legacy_socketio_path: str | None,
) -> LegacySurfaces:
    """The surfaces `legacy` names, or the flat keywords do; never both ways at once."""
    flat = LegacySurfaces(
        tasks=legacy_tasks_path,
        usage=legacy_usage_path,
        socket_token=legacy_socket_token_path,
        approvals=legacy_approvals_path,
        socketio=legacy_socketio_path,
    )
    if legacy is None:
        return flat
    if flat.taken():
        names = ", ".join(f"legacy_{name}_path" for name, _ in flat.taken())
        raise SettingsError(LEGACY_TWICE.format(names=names))
    return legacy
