"""The second step of composing a `Gateway`: ordering the stack of ASGI parts.

`build_stack` is the one place that orders the parts. A request enters at the top and each
part serves what is its own or passes it on. The lifespan part is the top one: it starts and
stops every piece of background work; the parts below only serve requests. Below the core
(identity, streams, runs, tickets) come the routes of each optional `Part`, then Socket.IO,
the prefix's 404, the parts' answers on the app's own paths, and the middleware around the
wrapped app alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..http.fallback import PrefixNotFound
from ..http.lifespan import Lifespan
from ..http.middleware import Middleware
from ..http.mount import Mount
from ..http.unavailable import DatabaseUnavailableAnswer
from ..identity.middleware import IdentityMiddleware
from ..identity.ticket_routes import TicketRoutes
from ..runs.routes import RunRoutes
from ..sockets import PresenceRoutes
from ..sockets.server import SOCKETIO_PATH
from ..streams import StreamRoutes
from ..types import ASGIApp
from .lifespan import background_work
from .parts import Part
from .services import Services


def stack_parts(
    services: Services, parts: Sequence[Part], *, allow_anonymous: bool
) -> list[Middleware]:
    """The stack, outermost first; a request goes down the list until a part serves it."""
    settings, plugins, legacy = services.settings, services.plugins, services.legacy
    prefix = services.prefix
    # Where the gateway refuses credentials it cannot accept. Elsewhere the app's requests
    # reach it as they came, and a legacy surface answers a request it cannot place as its
    # app did (the task poll in the app's own shape).
    own_paths = (prefix,)
    runs = services.runs
    stack = [
        Middleware(Lifespan, work=background_work(services, parts)),
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
        Middleware(StreamRoutes, service=services.streams, plugins=plugins, prefix=prefix),
        Middleware(
            RunRoutes,
            service=None if runs is None else runs.service,
            plugins=plugins,
            prefix=prefix,
            max_body_bytes=settings.http.max_body_bytes,
            max_message_bytes=settings.runs.max_message_bytes,
            body_timeout=settings.http.body_timeout,
        ),
        Middleware(
            TicketRoutes,
            tickets=services.tickets,
            prefix=prefix,
            legacy_path=legacy.socket_token,
            csrf_token_route=legacy.csrf_token_route,
        ),
    ]
    for part in parts:
        stack += part.routes
    if services.sockets is not None:
        stack.append(
            Middleware(PresenceRoutes, sockets=services.sockets, plugins=plugins, prefix=prefix)
        )
    stack.append(Middleware(Mount, path=prefix + SOCKETIO_PATH, mounted=services.socketio))
    stack.append(Middleware(PrefixNotFound, prefix=prefix))  # the prefix is the gateway's
    for part in parts:
        stack += part.app_paths
    stack += services.app_middleware
    for part in parts:
        stack += part.app_middleware
    return stack


def build_stack(services: Services, parts: Sequence[Part], *, allow_anonymous: bool) -> ASGIApp:
    app: ASGIApp = services.wrapped
    for middleware in reversed(stack_parts(services, parts, allow_anonymous=allow_anonymous)):
        app = middleware.build(app)
    return app
