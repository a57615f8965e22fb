"""`TicketRoutes`: where clients get their one-time Socket.IO tickets.

    POST {prefix}/socket-tickets   → {"ticket", "expires_in"}
    GET  /api/socket-token         → {"success": true, "token", "expires_in"}, the legacy
                                     app's answer, for clients that still ask there

Both need a principal (401). A browser principal (a cookie) must prove the request comes from
the app's pages: POST by the identity stage's CSRF check, the legacy GET here, by the session's
CSRF token in the ``X-CSRF-Token`` header or, for a client that cannot set headers, the
``csrf_token`` query parameter (403 otherwise). A browser's ticket is bound to the ``Origin``
it was asked from, and is refused at connect from any other. Asking too often is a 429 with
``Retry-After``. Issuing a ticket never revokes another: every tab, phone and CLI of a user
connects at once.
"""

from __future__ import annotations

import asyncio
import hmac
import math

from ..http.errors import HTTPError, send_json
from ..http.request import Request
from ..http.routing import Route, Router, RoutesMiddleware
from ..settings import DEFAULT_PREFIX
from ..types import ASGIApp
from .tickets import RateLimited, SocketTickets

RATE_LIMITED = "rate_limited"
CSRF_FAILED = "csrf_failed"
CSRF_MESSAGE = (
    "a ticket for a session cookie needs the session's CSRF token, in the X-CSRF-Token header "
    "or the csrf_token query parameter"
)
# Said after the message when the app's route that gives a page its token is known.
CSRF_ROUTE = " (GET {route} gives it)"
CSRF_HEADER = b"x-csrf-token"
CSRF_PARAM = "csrf_token"


class TicketRoutes(RoutesMiddleware):
    """:param tickets: the ticket store.
    :param prefix: where ``/socket-tickets`` lives.
    :param legacy_path: where the legacy token endpoint lives; None leaves it to the app.
    :param csrf_token_route: the app's route that gives a page its CSRF token, named in the
        answer to a request without one; None names none.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        tickets: SocketTickets,
        prefix: str = DEFAULT_PREFIX,
        legacy_path: str | None = None,
        csrf_token_route: str | None = None,
    ) -> None:
        super().__init__(
            app,
            Router(prefix.rstrip("/"), [Route("/socket-tickets", self.issue, methods=("POST",))]),
            legacy=(legacy_path, self.issue_legacy) if legacy_path else None,
        )
        self.tickets = tickets
        self.csrf_message = CSRF_MESSAGE + (
            CSRF_ROUTE.format(route=csrf_token_route) if csrf_token_route else ""
        )

    async def _issue(self, request: Request) -> tuple[str, int]:
        principal = request.principal
        origin = request.header(b"origin")
        try:
            ticket, ttl = await asyncio.to_thread(self.tickets.issue, principal, origin=origin)
        except RateLimited as exc:
            retry = str(math.ceil(exc.retry_after)).encode()
            raise HTTPError(429, RATE_LIMITED, str(exc), [(b"retry-after", retry)]) from None
        return ticket, int(ttl)

    async def issue(self, request: Request) -> None:
        ticket, ttl = await self._issue(request)
        await send_json(request.send, 200, {"ticket": ticket, "expires_in": ttl})

    async def issue_legacy(self, request: Request) -> None:
        # A GET, so the identity stage lets it pass without a CSRF token; a ticket is a
        # credential, so another site must not make a browser ask for one.
        principal = request.principal
        if principal.sent_by_browser:
            sent = request.header(CSRF_HEADER) or request.query.get(CSRF_PARAM)
            expected = principal.csrf_token
            if (
                not sent
                or not expected
                or not hmac.compare_digest(
                    sent.encode("utf-8", "surrogateescape"), expected.encode("utf-8")
                )
            ):
                raise HTTPError(403, CSRF_FAILED, self.csrf_message)
        ticket, ttl = await self._issue(request)
        await send_json(request.send, 200, {"success": True, "token": ticket, "expires_in": ttl})
