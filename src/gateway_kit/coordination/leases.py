"""Leases with expiry in the database: one holder at a time of a goose session's pump, or of a
run the app writes itself (`gateway_kit.app_runs.owned`).

The holder renews well before expiry; when it dies, the lease runs out and another process
takes it over. `token` grows on every change of holder, so a holder can tell it was replaced.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..log import EventLog
from .tables import leases

# Seconds a lease lasts unrenewed: after its holder dies, how long until another may take it.
DEFAULT_LEASE_TTL = 10.0


class LeaseLost(Exception):
    """The lease is no longer this holder's: another took it over, or it ran out and what it
    guarded was ended elsewhere."""


_MINE = sa.and_(
    leases.c.name == sa.bindparam("name"),
    leases.c.holder == sa.bindparam("holder"),
    leases.c.token == sa.bindparam("token"),
)
RENEW = leases.update().where(_MINE).values(expires_at=sa.bindparam("until"))
RELEASE = leases.delete().where(_MINE)


@functools.cache
def _acquire_statement(dialect: str) -> sa.Insert:
    """Take or renew a lease in one statement; built once per database kind, so it compiles
    once (a pump takes its session's lease before it reads anything)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    holder = sa.bindparam("holder", type_=sa.Text)
    now = sa.bindparam("now", type_=sa.Float)
    until = sa.bindparam("until", type_=sa.Float)
    return (
        insert(leases)
        .values(name=sa.bindparam("name"), holder=holder, token=1, expires_at=until)
        .on_conflict_do_update(
            index_elements=[leases.c.name],
            set_={
                "holder": holder,
                "expires_at": until,
                "token": sa.case(
                    (leases.c.holder == holder, leases.c.token),
                    else_=leases.c.token + 1,
                ),
            },
            where=sa.or_(leases.c.expires_at < now, leases.c.holder == holder),
        )
        .returning(leases.c.token)
    )


class Lease:
    """A lease in the log's database; each change is one statement (`Tables.write`)."""

    def __init__(
        self, log: EventLog, name: str, holder: str, ttl: float = DEFAULT_LEASE_TTL
    ) -> None:
        self.tables = log.tables
        self.name = name
        self.holder = holder
        self.ttl = ttl
        self.token: int | None = None
        self.valid_until = 0.0

    @property
    def held(self) -> bool:
        """Held, with a safety margin: act on it only while well inside the expiry."""
        return self.token is not None and time.time() < self.valid_until - self.ttl / 4

    def acquire(self) -> bool:
        """Take the lease if it is free, expired or already ours (which renews it)."""
        now = time.time()
        statement = _acquire_statement(self.tables.dialect)
        params = {"name": self.name, "holder": self.holder, "now": now, "until": now + self.ttl}
        rows = self.tables.write(statement, params).rows
        if not rows:  # another holder's lease, still running
            self.token = None
            return False
        self.token = int(rows[0][0])
        self.valid_until = now + self.ttl
        return True

    def renew(self) -> bool:
        """Extend the lease this holder has; False when it is gone or another holder's.

        Unlike `acquire`, never takes a lease (back): a lease that was deleted or taken over
        while this holder was away stays lost to it, even where the name is free again.
        """
        if self.token is None:
            return False
        now = time.time()
        params = {**self._mine(), "until": now + self.ttl}
        renewed = self.tables.write(RENEW, params).rowcount == 1
        if not renewed:
            self.token = None
            return False
        self.valid_until = now + self.ttl
        return True

    def release_statement(self) -> tuple[sa.Delete, dict[str, Any]]:
        """The statement that releases this lease and its parameters, for running in another
        transaction."""
        return RELEASE, self._mine()

    def release(self) -> None:
        if self.token is None:
            return
        self.tables.write(*self.release_statement())
        self.token = None

    def _mine(self) -> dict[str, Any]:
        return {"name": self.name, "holder": self.holder, "token": self.token}
