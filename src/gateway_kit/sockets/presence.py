"""`Presence`: who watches which stream, per user and per connection, across processes.

Each Socket.IO connection and each of its subscriptions is a row; a process's rows count only
while its lease (renewed by that process) lives, so a process that dies stops counting within a
lease's time, and any process deletes what it left. Every process answers the same.

A process whose lease ran out while the database was away may find its rows deleted by another
process; they are written again from what its connections hold (`restore`).
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..coordination.keepalive import LeaseKeeper
from ..coordination.leases import DEFAULT_LEASE_TTL, Lease
from ..coordination.tables import leases
from ..log import EventLog
from ..principal import Principal
from .tables import socket_connections, socket_subscriptions

logger = logging.getLogger(__name__)

LEASE_PREFIX = "socket-process:"

# A connection's process lease, and the process leases still running at "now": a connection
# counts only while its process's lease runs. The statements are built once: presence is
# asked on every (un)subscription and swept every few seconds.
PROCESS_LEASE = sa.literal(LEASE_PREFIX) + socket_connections.c.process_id
RUNNING = leases.c.expires_at > sa.bindparam("now", type_=sa.Float)

WATCHING = (
    sa.select(
        socket_connections.c.connection_id,
        socket_connections.c.user_id,
        socket_connections.c.method,
        socket_subscriptions.c.subscribed_at,
    )
    .select_from(
        socket_subscriptions.join(
            socket_connections,
            socket_connections.c.connection_id == socket_subscriptions.c.connection_id,
        ).join(leases, sa.and_(leases.c.name == PROCESS_LEASE, RUNNING))
    )
    .where(socket_subscriptions.c.stream == sa.bindparam("stream"))
    .order_by(socket_subscriptions.c.subscribed_at)
)
# The connections of processes whose lease ran out (mostly none).
DEAD_CONNECTIONS = sa.select(socket_connections.c.connection_id).where(
    PROCESS_LEASE.not_in(sa.select(leases.c.name).where(RUNNING))
)


# Subscriptions change on every (un)subscribe: each is one statement (`Tables.write`), built
# once.
# Built once, with bind parameters: the log's tables compile each statement once per driver.
CONNECTED = socket_connections.insert().values(
    {column.name: sa.bindparam(column.name) for column in socket_connections.c}
)
UNSUBSCRIBE = socket_subscriptions.delete().where(
    socket_subscriptions.c.connection_id == sa.bindparam("connection_id"),
    socket_subscriptions.c.stream == sa.bindparam("stream"),
)


@functools.cache
def _subscribe_statement(dialect: str) -> sa.Insert:
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    at = sa.bindparam("at", type_=sa.Float)
    return (
        insert(socket_subscriptions)
        .values(
            connection_id=sa.bindparam("connection_id"),
            stream=sa.bindparam("stream"),
            subscribed_at=at,
        )
        .on_conflict_do_update(
            index_elements=[socket_subscriptions.c.connection_id, socket_subscriptions.c.stream],
            set_={"subscribed_at": at},
        )
    )


class Presence:
    def __init__(self, log: EventLog, process_id: str, *, ttl: float = DEFAULT_LEASE_TTL) -> None:
        self.log = log
        self.tables = log.tables
        self.process_id = process_id
        self.lease = Lease(log, LEASE_PREFIX + process_id, process_id, ttl)
        # Renewed from the server's periodic checks, not a task of its own; taken anew after
        # a pause long enough to lose it, since this process's connections still count.
        self.keeper = LeaseKeeper(self.lease, f"process {process_id}", logger=logger, retake=True)

    def keep_alive(self) -> None:
        """Renew this process's lease when a third of its time has passed (taking it anew after
        a pause long enough to lose it), and then delete what dead processes left. Each is a
        write, which waits for the log's appends: neither is done more often than needed."""
        if not self.keeper.due():
            return
        self.keeper.renew_now()
        self.sweep()

    def lapsed(self) -> bool:
        """Whether the lease ran out before it was renewed (since this was last asked): other
        processes may have deleted this process's rows meanwhile."""
        return self.keeper.lapsed()

    def restore(self, connections: list[tuple[str, Principal, set[str]]]) -> None:
        """Make this process's rows what its connections hold now: ``(connection_id,
        principal, streams)`` each, in one transaction."""
        now = time.time()
        with self.tables.transaction() as conn:
            self._delete_mine(conn)
            for connection_id, principal, streams in connections:
                conn.execute(CONNECTED, self._connection_params(connection_id, principal, now))
                for stream in streams:
                    conn.execute(
                        socket_subscriptions.insert().values(
                            connection_id=connection_id, stream=stream, subscribed_at=now
                        )
                    )

    def _connection_params(
        self, connection_id: str, principal: Principal, now: float | None = None
    ) -> dict[str, Any]:
        return {
            "connection_id": connection_id,
            "process_id": self.process_id,
            "user_id": principal.user_id,
            "method": principal.method,
            "credential_id": principal.credential_id,
            "connected_at": time.time() if now is None else now,
        }

    def _delete_mine(self, conn: sa.Connection) -> None:
        mine = sa.select(socket_connections.c.connection_id).where(
            socket_connections.c.process_id == self.process_id
        )
        conn.execute(
            socket_subscriptions.delete().where(socket_subscriptions.c.connection_id.in_(mine))
        )
        conn.execute(
            socket_connections.delete().where(socket_connections.c.process_id == self.process_id)
        )

    def connected(self, connection_id: str, principal: Principal) -> None:
        if not self.lease.held:
            self.keep_alive()
        self.tables.write(CONNECTED, self._connection_params(connection_id, principal))

    def disconnected(self, connection_id: str) -> None:
        """Forget a connection and what it watched."""
        with self.tables.transaction() as conn:
            conn.execute(
                socket_subscriptions.delete().where(
                    socket_subscriptions.c.connection_id == connection_id
                )
            )
            conn.execute(
                socket_connections.delete().where(
                    socket_connections.c.connection_id == connection_id
                )
            )

    def subscribed(self, connection_id: str, stream: str) -> None:
        """Note a subscription, or when it was made again: one statement, so that subscribes
        of one connection to one stream that overlap cannot both insert."""
        params = {"connection_id": connection_id, "stream": stream, "at": time.time()}
        self.tables.write(_subscribe_statement(self.tables.dialect), params)

    def unsubscribed(self, connection_id: str, stream: str) -> None:
        self.tables.write(UNSUBSCRIBE, {"connection_id": connection_id, "stream": stream})

    def watching(self, stream: str) -> dict[str, Any]:
        """Who watches `stream` now: each user with their number of connections, and each
        connection (its id, user and how it logged in); the same from every process."""
        rows = self.tables.select(WATCHING, {"stream": stream, "now": time.time()})
        users: dict[str, int] = {}
        for row in rows:
            users[row.user_id] = users.get(row.user_id, 0) + 1
        return {
            "stream": stream,
            "users": [{"user_id": user, "connections": n} for user, n in users.items()],
            "connections": [
                {"connection_id": row.connection_id, "user_id": row.user_id, "method": row.method}
                for row in rows
            ],
        }

    def sweep(self) -> None:
        """Delete the rows of processes whose lease ran out (they died).

        First looked for on the log's own reader, which takes no write lock: the look mostly
        finds nothing, and then neither waits for an append nor makes one wait. What it finds
        is looked for again in the deleting transaction, where no lease can be renewed between
        the look and the delete."""
        params = {"now": time.time()}
        if not self.tables.select(DEAD_CONNECTIONS, params):
            return
        with self.tables.transaction() as conn:
            gone = list(conn.execute(DEAD_CONNECTIONS, params).scalars())
            if gone:
                conn.execute(
                    socket_subscriptions.delete().where(
                        socket_subscriptions.c.connection_id.in_(gone)
                    )
                )
                conn.execute(
                    socket_connections.delete().where(socket_connections.c.connection_id.in_(gone))
                )

    def close(self) -> None:
        """This process stops serving: its rows go now, not when its lease runs out."""
        with self.tables.transaction() as conn:
            self._delete_mine(conn)
        self.lease.release()
