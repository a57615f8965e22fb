"""The second step of composing a `Gateway`: ordering the stack of ASGI parts.

`build_stack` is the one place that orders the parts. A request enters at the top and each
part serves what is its own or passes it on. The lifespan part is the top one: it starts and
stops every piece of background work; the parts below only serve requests.
"""

from __future__ import annotations

from ..approvals.routes import ApprovalRoutes
from ..execution.routes import HeartbeatRoutes
from ..http.fallback import PrefixNotFound
from ..http.lifespan import Lifespan
from ..http.middleware import Middleware
from ..http.mount import Mount
from ..http.unavailable import DatabaseUnavailableAnswer
from ..identity.middleware import IdentityMiddleware
from ..identity.ticket_routes import TicketRoutes
from ..runs.routes import RunRoutes
from ..sockets import PresenceRoutes
from ..streams import LegacyTaskPoll, StreamRoutes
from ..types import ASGIApp
from ..usage import UsageRoutes
from .legacy import LegacySurfaces
from .lifespan import background_work
from .services import Services

SOCKETIO_PATH = "/socket.io"


def stack_parts(
    services: Services, legacy: LegacySurfaces, *, allow_anonymous: bool
) -> list[Middleware]:
    """The parts, outermost first; a request goes down the list until a part serves it."""
    settings, plugins, streams = services.settings, services.plugins, services.streams
    prefix = settings.prefix
    # Where the gateway refuses credentials it cannot accept. Elsewhere the app's requests
    # reach it as they came, and a legacy surface answers a request it cannot place as its
    # app did (the task poll in the app's own shape).
    own_paths = (prefix,)
    runs = services.runs
    approvals = None if services.approvals is None else services.approvals.service
    parts = [
        Middleware(Lifespan, work=background_work(services)),
        # Above every part that may need the database: its outage is one answer, a 503.
        Middleware(DatabaseUnavailableAnswer),
        Middleware(
            IdentityMiddleware,
            plugins=plugins,
            allow_anonymous=allow_anonymous,
            csrf_paths=(prefix,),
            csrf_exempt=(prefix + SOCKETIO_PATH,),
            logins=services.logins,
            own_paths=own_paths,
            answered_paths=[path for _, path in legacy.taken()],
            csrf_token_route=legacy.csrf_token_route,
        ),
        Middleware(StreamRoutes, service=streams, plugins=plugins, prefix=prefix),
        Middleware(
            RunRoutes,
            service=None if runs is None else runs.service,
            plugins=plugins,
            prefix=prefix,
            max_body_bytes=settings.max_body_bytes,
            max_message_bytes=settings.max_message_bytes,
            body_timeout=settings.body_timeout,
        ),
        Middleware(
            TicketRoutes,
            tickets=services.tickets,
            prefix=prefix,
            legacy_path=legacy.socket_token,
            csrf_token_route=legacy.csrf_token_route,
        ),
        Middleware(
            UsageRoutes,
            ledger=services.usage,
            prefix=prefix,
            legacy_path=legacy.usage,
        ),
        Middleware(HeartbeatRoutes, decider=services.execution.decider, prefix=prefix),
        Middleware(
            ApprovalRoutes,
            approvals=approvals,
            plugins=plugins,
            prefix=prefix,
            max_body_bytes=settings.max_body_bytes,
            body_timeout=settings.body_timeout,
            legacy_path=legacy.approvals,
        ),
    ]
    if services.sockets is not None:
        parts.append(
            Middleware(PresenceRoutes, sockets=services.sockets, plugins=plugins, prefix=prefix)
        )
    parts.append(Middleware(Mount, path=prefix + SOCKETIO_PATH, mounted=services.socketio))
    if legacy.socketio is not None:
        # Long polls held in the wrapped app would each hold one of its threads.
        legacy_socketio = Middleware(
            Mount,
            path=legacy.socketio,
            mounted=services.socketio,
            as_path=prefix + SOCKETIO_PATH,
        )
        parts.append(legacy_socketio)
    parts.append(Middleware(PrefixNotFound, prefix=prefix))  # the prefix is the gateway's
    if legacy.tasks is not None:
        parts.append(
            Middleware(
                LegacyTaskPoll,
                service=streams,
                plugins=plugins,
                path=legacy.tasks,
                shape=legacy.task_shape,
            )
        )
    parts.extend(services.app_middleware)
    return parts


def build_stack(services: Services, legacy: LegacySurfaces, *, allow_anonymous: bool) -> ASGIApp:
    app: ASGIApp = services.wrapped
    for part in reversed(stack_parts(services, legacy, allow_anonymous=allow_anonymous)):
        app = part.build(app)
    return app
