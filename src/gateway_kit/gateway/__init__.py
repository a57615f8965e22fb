"""`Gateway`: the ASGI application, a stack of small parts around the wrapped app.

It is composed in visible steps: `services.build_services` builds what the parts share (the
plugins, the stream service, the run store, lifecycle, pumps and service, the Socket.IO
server, ...), `parts.build_parts` makes each optional part (`Part`: approvals, execution,
usage, the legacy surfaces, and any given in ``parts=``), and `stack.build_stack` orders them,
the lifespan part at the top starting and stopping every piece of background work
(`lifespan.background_work`). `Gateway` adds nothing of its own, and each part is a middleware
usable alone around any ASGI app. Every setting is in `GatewaySettings` (docs/settings.md).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack

from ..exceptions import SettingsError
from ..log import EventLog
from ..settings import DEFAULT_APPROVAL_EXPIRY, DEFAULT_PREFIX, check_seconds, normalize_path
from ..sockets.server import SOCKETIO_PATH
from ..types import ASGIApp, Receive, Scope, Send
from ..wrapped import is_wsgi
from .adapters import AnyUpstream
from .deprecated import DeprecatedKeywords, check_known, legacy_from, settings_from, warn
from .legacy import LegacySurfaces
from .parts import BUILT_IN_PARTS, Part, PartFactory, build_parts
from .services import CookieLogins, Services, build_plugins, build_services, cookie_logins
from .settings import GatewaySettings
from .stack import build_stack

logger = logging.getLogger(__name__)

ANONYMOUS_WARNING = (
    "allow_anonymous=True: requests without credentials are served as 'anonymous', allowed "
    "everything. Use this for demos and tests only."
)

__all__ = [
    "BUILT_IN_PARTS",
    "SOCKETIO_PATH",
    "Gateway",
    "GatewaySettings",
    "LegacySurfaces",
    "Part",
    "PartFactory",
    "Services",
    "is_wsgi",
]

NOT_SETTINGS = "Gateway(settings=...) must be a GatewaySettings, got {value!r}"


class Gateway:
    """The ASGI application: the gateway's routes under `prefix`, the wrapped app elsewhere.

    :param app: the application to wrap: WSGI (a Flask app, mounted through `a2wsgi`) or ASGI;
        None serves only the gateway's own routes.
    :param log: the `EventLog` every stream is read from.
    :param upstream: the agent runs go to: a `GooseUpstream` (goosed) or an `AcpUpstream` (an
        agent speaking ACP); without one, starting a run is a 501.
    :param plugins: plugin modules or objects, registered after the installed ones.
    :param settings: every tunable, one options object per part (`GatewaySettings`; each
        setting, its default and meaning: docs/settings.md).
    :param prefix: where the gateway's own routes live.
    :param allow_anonymous: serve requests without credentials as ``anonymous``, who may read
        every stream (and log a warning at start-up). By default every gateway route, and the
        legacy task poll, needs a principal (401 otherwise).
    :param plugin_config: settings per plugin name, handed to each plugin's `configure_plugin`
        (a name no loaded plugin has is an error).
    :param approval_expiry: seconds a pending approval waits for a decision; then it is
        denied, and goose is told so (an elicitation waits at most goose's own 300 s).
    :param legacy: which of the app's own paths the gateway answers instead of the app
        (`LegacySurfaces`); None: none, every request outside `prefix` is the app's, answered
        as without the gateway. Each is logged at start-up.
    :param load_entry_points: also load plugins of other installed distributions (the
        ``gateway_kit`` entry-point group); the built-ins load either way.
    :param block_plugins: names of plugins not to load, built-ins included.
    :param parts: more parts (`Part`), after the built-in ones: each a function of the
        gateway's `Services` answering its routes, app middleware and background work.
    :param socketio: an ASGI application to serve at ``{prefix}/socket.io`` (HTTP and
        websocket requests, their paths unchanged) instead of the gateway's own Socket.IO
        server (`gateway_kit.sockets.SocketServer`).
    :param app_middleware: middleware around the wrapped app only (an observer of its
        traffic), outermost first: `Middleware` objects or anything iterable as ``(cls, args,
        kwargs)``, such as Starlette's.
    :param wsgi: whether `app` is WSGI; None guesses (a Flask app, an ``async def __call__``,
        the number of parameters) and raises `TypeError` when it cannot tell.

    The flat keywords of earlier releases (``ping_interval=``, ``pump_settings=``,
    ``legacy_tasks_path=``, ...) still work, each with a `DeprecationWarning` naming its place
    in `settings` or `legacy`; one given both ways is a `SettingsError`.
    """

    def __init__(
        self,
        app: object | None = None,
        *,
        log: EventLog,
        upstream: AnyUpstream | None = None,
        plugins: Sequence[object] = (),
        settings: GatewaySettings | None = None,
        prefix: str = DEFAULT_PREFIX,
        allow_anonymous: bool = False,
        plugin_config: Mapping[str, Mapping[str, Any]] | None = None,
        approval_expiry: float = DEFAULT_APPROVAL_EXPIRY,
        legacy: LegacySurfaces | None = None,
        load_entry_points: bool = True,
        block_plugins: Iterable[str] = (),
        parts: Sequence[PartFactory] = (),
        socketio: ASGIApp | None = None,
        app_middleware: Sequence[Iterable[Any]] = (),
        wsgi: bool | None = None,
        **deprecated: Unpack[DeprecatedKeywords],
    ) -> None:
        if settings is None:
            settings = GatewaySettings()
        elif not isinstance(settings, GatewaySettings):
            raise SettingsError(NOT_SETTINGS.format(value=settings))
        check_known(deprecated)
        warn(deprecated, stacklevel=2)
        self.settings, self.approval_expiry = settings_from(settings, approval_expiry, deprecated)
        check_seconds("approval_expiry", self.approval_expiry)
        self.prefix = normalize_path("prefix", prefix, example=DEFAULT_PREFIX)
        self.legacy = legacy_from(legacy, deprecated)
        self.legacy.check_outside(self.prefix)
        self.log = log
        self.upstream = upstream
        self.allow_anonymous = allow_anonymous
        self.plugins = build_plugins(
            plugins,
            log=log,
            app=app,
            settings=self.settings,
            prefix=self.prefix,
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
            prefix=self.prefix,
            approval_expiry=self.approval_expiry,
            legacy=self.legacy,
            socketio=socketio,
            wsgi=wsgi,
            app_middleware=app_middleware,
        )
        # Step two: the optional parts, built-in ones first, each from the services.
        self.parts: list[Part] = build_parts(services, parts)
        runs = services.runs
        self.wrapped = services.wrapped
        self.tickets = services.tickets
        self.app_middleware = [
            *services.app_middleware,
            *(middleware for part in self.parts for middleware in part.app_middleware),
        ]
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
        # Step three: the stack, in order.
        self.stack = self.build_middleware_stack()
        if allow_anonymous:
            logger.warning(ANONYMOUS_WARNING)
        self.legacy.log_taken()

    @property
    def wsgi(self) -> bool:
        return self.wrapped.wsgi

    def build_middleware_stack(self) -> ASGIApp:
        """The parts, outermost first (`gateway_kit.gateway.stack`); a request goes down the
        list until a part serves it."""
        return build_stack(self.services, self.parts, allow_anonymous=self.allow_anonymous)

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
