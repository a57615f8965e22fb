"""`IdentityMiddleware`: the first part of the stack, which gives every request its principal.

The `resolve_principal` hooks are asked in turn; the first `Principal` one answers goes into the
scope (``scope["gateway_kit.principal"]``, read with `gateway_kit.principal.principal_of`) for
every part below, the wrapped app included. A resolver that fails (raises, answers nonsense,
takes too long) refuses the request: 401 for HTTP, a refused handshake for a websocket. When no
resolver answers, the request is the anonymous principal.
"""

from __future__ import annotations

from ..hooks import Plugins
from ..hooks.policy import Refused
from ..http.errors import UNAUTHENTICATED, send_error
from ..principal import ANONYMOUS, PRINCIPAL_KEY
from ..types import ASGIApp, Receive, Scope, Send

REFUSED_MESSAGE = "the request's credentials could not be checked; try again or log in again"
# Closing before accepting makes the server refuse the handshake (HTTP 403).
WEBSOCKET_REFUSED = {"type": "websocket.close", "code": 1008, "reason": REFUSED_MESSAGE}


class IdentityMiddleware:
    """:param plugins: whose `resolve_principal` hooks to ask (a `Plugins` of the built-ins
    when not given)."""

    def __init__(self, app: ASGIApp, *, plugins: Plugins | None = None) -> None:
        self.app = app
        self.plugins = plugins if plugins is not None else Plugins()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        answer = self.plugins.resolve_principal(scope)
        if isinstance(answer, Refused):
            if kind == "http":
                await send_error(send, 401, UNAUTHENTICATED, REFUSED_MESSAGE)
            else:
                await send(WEBSOCKET_REFUSED)
            return
        scope[PRINCIPAL_KEY] = answer or ANONYMOUS
        await self.app(scope, receive, send)
