"""`SocketAdmission`: who may open a Socket.IO connection, and whether its credential still
holds once it is open.

A connect is admitted by a one-time ticket (`SocketTickets`), never by a cookie: the ticket is
consumed atomically, and it must have been issued to the connect's Origin (a browser's) and to
the user of any credentials the handshake itself carries (a ticket passed to someone else is
refused). Origins are checked against an allowlist, by default the gateway's own origin;
clients that send no Origin (a CLI) are not asked. An open connection holds while its
credential does: an API token not revoked, a cookie login not logged out since the ticket was
issued. Each refusal says why, with a code a client can act on.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..principal import BEARER_METHOD, COOKIE_METHOD, HOST_METHOD, Principal, principal_of
from .credentials import CredentialView
from .logins import EndedLogins
from .tickets import SocketTickets

TOKEN_METHODS = (BEARER_METHOD, HOST_METHOD)  # credentials that are rows of ApiTokens
TICKET_NEEDED = "connect with auth={{'ticket': ...}}: POST {prefix}/socket-tickets gives one"
TICKET_REFUSED = "the ticket is unknown, used already or expired: ask for a new one"
WRONG_ORIGIN = "the ticket was issued to another origin"
FOREIGN_ORIGIN = "{origin} is not an accepted origin of this gateway"
ANOTHER_USER = "the ticket was issued to another user than this connection's credentials"
CREDENTIAL_ENDED = "the credential that asked for this ticket was revoked or logged out"


class AdmissionRefused(Exception):
    """A connect that may not go on: `message` for the client, `code` for its program."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class Admitted:
    principal: Principal
    since: float  # the ticket's issue: its credential ending after this closes the connection


class SocketAdmission:
    """:param tickets: the ticket store connects consume their tickets from.
    :param credentials: this process's view of API tokens (revoked ones end connections).
    :param ended_logins: where ended cookie logins are known.
    :param origins: the browser origins allowed to connect; None: the gateway's own only.
    :param prefix: the gateway's prefix, named in the refusal of a connect without a ticket.
    """

    def __init__(
        self,
        *,
        tickets: SocketTickets,
        credentials: CredentialView,
        ended_logins: EndedLogins,
        origins: Iterable[str] | None = None,
        prefix: str = "/gateway",
    ) -> None:
        self.tickets = tickets
        self.credentials = credentials
        self.ended_logins = ended_logins
        self.origins = frozenset(origins) if origins is not None else None
        self.prefix = prefix

    def allowed_origin(self, origin: str | None, environ: dict[str, Any]) -> bool:
        """Whether a connect sent from `origin` may go on: no Origin (not a browser), one of
        the allowlist, or by default the gateway's own origin."""
        if origin is None:
            return True
        if self.origins is not None:
            return origin in self.origins
        scope = environ.get("asgi.scope") or {}
        scheme = {"ws": "http", "wss": "https"}.get(scope.get("scheme", "http"), "http")
        host = environ.get("HTTP_HOST")
        return host is not None and origin == f"{scheme}://{host}"

    async def admit(self, environ: dict[str, Any], auth: Any) -> Admitted:
        """The principal a connect is admitted as, its ticket now used; `AdmissionRefused`
        saying why when it is not. Whether the credential still holds is `holds`'s to say."""
        origin = environ.get("HTTP_ORIGIN")
        if not self.allowed_origin(origin, environ):
            raise AdmissionRefused(FOREIGN_ORIGIN.format(origin=origin), "origin_refused")
        # "token": what the legacy app's clients send, with what GET /api/socket-token gave.
        ticket = (auth.get("ticket") or auth.get("token")) if isinstance(auth, dict) else None
        if not isinstance(ticket, str) or not ticket:
            raise AdmissionRefused(TICKET_NEEDED.format(prefix=self.prefix), "ticket_required")
        holder = await asyncio.to_thread(self.tickets.consume, ticket)
        if holder is None:
            raise AdmissionRefused(TICKET_REFUSED, "ticket_refused")
        if holder.origin is not None and holder.origin != origin:
            raise AdmissionRefused(WRONG_ORIGIN, "ticket_origin")
        principal = holder.principal
        sent_by = principal_of(environ.get("asgi.scope") or {})
        if sent_by is not None and not sent_by.anonymous and sent_by.user_id != principal.user_id:
            raise AdmissionRefused(ANOTHER_USER, "ticket_user")
        return Admitted(principal, holder.issued_at)

    def holds(self, principal: Principal, since: float) -> bool:
        """Whether the credential `principal` connected with still holds (from memory)."""
        credential = principal.credential_id
        if credential is None:
            return True
        if principal.method in TOKEN_METHODS:
            return self.credentials.token_live(credential)
        if principal.method == COOKIE_METHOD:
            return not self.ended_logins.ended(credential, since)
        return True
