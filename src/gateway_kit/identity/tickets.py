"""`SocketTickets`: one-time tickets a client trades for a Socket.IO connection.

A ticket is 256 random bits, stored as its SHA-256, valid for `ttl` seconds and for one
connect: consuming it is one conditional UPDATE (unused and unexpired → used), so two connects
racing with one ticket get one connection. It is bound to the user and credential it was issued
to, and for a browser to the Origin of the page that asked. Issuing never touches the user's
other tickets, so any number of tabs and devices connect at once; a user holding more than
`per_user` unused tickets loses the oldest, and a credential asking more than `rate` times in
`rate_window` seconds is told when to come back.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import sqlalchemy as sa

from ..log import EventLog
from ..principal import Principal
from ..settings import DEFAULT_TICKET_RATE, DEFAULT_TICKET_TTL, check_count, check_seconds
from .secrets import digest, new_secret
from .tables import socket_tickets

DEFAULT_TTL = DEFAULT_TICKET_TTL
DEFAULT_PER_USER = 32
DEFAULT_RATE, DEFAULT_RATE_WINDOW = DEFAULT_TICKET_RATE
# Used and expired tickets are kept this long (for the rate window), then deleted.
KEEP_SPENT = 60.0


# One conditional UPDATE, so that of two connects racing with one ticket one gets it; built
# once, since every Socket.IO connect runs it.
CONSUME = (
    socket_tickets.update()
    .where(
        socket_tickets.c.ticket_hash == sa.bindparam("ticket_hash"),
        socket_tickets.c.used_at.is_(None),
        socket_tickets.c.expires_at > sa.bindparam("now"),
    )
    .values(used_at=sa.bindparam("now"))
    .returning(
        socket_tickets.c.user_id,
        socket_tickets.c.method,
        socket_tickets.c.credential_id,
        socket_tickets.c.scopes,
        socket_tickets.c.origin,
        socket_tickets.c.issued_at,
    )
)


class RateLimited(Exception):
    def __init__(self, retry_after: float) -> None:
        super().__init__(f"too many tickets asked for; try again in {retry_after:.0f} s")
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class TicketHolder:
    """Whom a consumed ticket was issued to."""

    principal: Principal
    origin: str | None
    issued_at: float = 0.0  # a cookie login that ended since then is refused


class SocketTickets:
    def __init__(
        self,
        log: EventLog,
        *,
        ttl: float = DEFAULT_TTL,
        per_user: int = DEFAULT_PER_USER,
        rate: int = DEFAULT_RATE,
        rate_window: float = DEFAULT_RATE_WINDOW,
    ) -> None:
        check_seconds("ttl", ttl)
        check_seconds("rate_window", rate_window)
        check_count("per_user", per_user)
        check_count("rate", rate)
        self.log = log
        self.ttl = float(ttl)
        self.per_user = per_user
        self.rate = rate
        self.rate_window = float(rate_window)

    def issue(self, principal: Principal, *, origin: str | None = None) -> tuple[str, float]:
        """A new ticket for `principal` (bound to `origin` when a browser asked): its text and
        seconds to live. `RateLimited` when its credential asked too often."""
        now = time.time()
        ticket = new_secret()
        holder = principal.credential_id or f"user:{principal.user_id}"
        with self.log.tables.transaction() as conn:
            # Spent and expired rows go, but not while they still count for the rate.
            conn.execute(
                socket_tickets.delete().where(
                    socket_tickets.c.expires_at < now - KEEP_SPENT,
                    socket_tickets.c.issued_at <= now - self.rate_window,
                )
            )
            recent = (
                conn.execute(
                    sa.select(socket_tickets.c.issued_at)
                    .where(
                        socket_tickets.c.credential_id == holder,
                        socket_tickets.c.issued_at > now - self.rate_window,
                    )
                    .order_by(socket_tickets.c.issued_at)
                )
                .scalars()
                .all()
            )
            if len(recent) >= self.rate:
                raise RateLimited(max(1.0, recent[0] + self.rate_window - now))
            conn.execute(
                socket_tickets.insert().values(
                    ticket_hash=digest(ticket),
                    user_id=principal.user_id,
                    method=principal.method,
                    credential_id=holder,
                    scopes=json.dumps(sorted(principal.scopes)),
                    origin=origin,
                    issued_at=now,
                    expires_at=now + self.ttl,
                )
            )
            # The per-user cap: the oldest unused tickets beyond it go, nothing else does.
            unused = (
                sa.select(socket_tickets.c.ticket_hash)
                .where(
                    socket_tickets.c.user_id == principal.user_id,
                    socket_tickets.c.used_at.is_(None),
                    socket_tickets.c.expires_at > now,
                )
                .order_by(socket_tickets.c.issued_at.desc(), socket_tickets.c.ticket_hash)
                .offset(self.per_user)
            )
            evicted = conn.execute(unused).scalars().all()
            if evicted:
                conn.execute(
                    socket_tickets.delete().where(socket_tickets.c.ticket_hash.in_(evicted))
                )
        return ticket, self.ttl

    def consume(self, ticket: str) -> TicketHolder | None:
        """Use `ticket` up: whom it was issued to, or None when it is unknown, used, expired or
        evicted. Atomic: of two consumers of one ticket, one gets it."""
        if not isinstance(ticket, str) or not ticket or len(ticket) > 200:
            return None
        now = time.time()
        rows = self.log.tables.write(CONSUME, {"ticket_hash": digest(ticket), "now": now}).rows
        if not rows:
            return None
        row = rows[0]
        credential = None if row.credential_id.startswith("user:") else row.credential_id
        principal = Principal(
            user_id=row.user_id,
            method=row.method,
            credential_id=credential,
            scopes=frozenset(json.loads(row.scopes)),
        )
        return TicketHolder(principal, row.origin, row.issued_at)
