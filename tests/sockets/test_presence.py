"""Presence rows: a process that died stops counting, and any other process deletes its rows."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import sqlalchemy as sa

from gateway_kit import EventLog
from gateway_kit.coordination.tables import leases
from gateway_kit.principal import Principal
from gateway_kit.sockets.presence import LEASE_PREFIX, Presence
from gateway_kit.sockets.tables import socket_connections, socket_subscriptions
from tests.support.waiting import answered_while_another_writes

STREAM = "conv-1"


def watching(presence: Presence) -> list[str]:
    return [c["connection_id"] for c in presence.watching(STREAM)["connections"]]


def watcher(log: EventLog, process: str, connection: str, user: str) -> Presence:
    presence = Presence(log, process)
    presence.connected(connection, Principal(user, "bearer", "tok-" + user, frozenset()))
    presence.subscribed(connection, STREAM)
    return presence


def expire(log: EventLog, process: str) -> None:
    """The process died: its lease ran out unrenewed."""
    log.tables.write(
        leases.update().where(leases.c.name == LEASE_PREFIX + process).values(expires_at=0.0)
    )


def rows_of(log: EventLog, connection: str) -> int:
    """How many rows (the connection's and its subscriptions') are left of `connection`."""
    counts = [
        sa.select(sa.func.count()).where(table.c.connection_id == connection).scalar_subquery()
        for table in (socket_connections, socket_subscriptions)
    ]
    return int(log.tables.select(sa.select((counts[0] + counts[1]).label("n")))[0].n)


def test_a_live_process_sweeping_deletes_only_what_dead_processes_left(log: EventLog) -> None:
    alive = watcher(log, "alive", "c-alive", "ann")
    watcher(log, "dead", "c-dead", "bob")
    assert sorted(watching(alive)) == ["c-alive", "c-dead"]

    expire(log, "dead")
    assert watching(alive) == ["c-alive"]  # a dead process stops counting at once
    assert rows_of(log, "c-dead") == 2

    alive.sweep()
    assert rows_of(log, "c-dead") == 0
    assert rows_of(log, "c-alive") == 2
    assert watching(alive) == ["c-alive"]


def test_a_sweep_leaves_the_rows_of_processes_whose_lease_lives(log: EventLog) -> None:
    one = watcher(log, "one", "c-1", "ann")
    watcher(log, "two", "c-2", "bob")
    one.sweep()
    assert sorted(watching(one)) == ["c-1", "c-2"]
    assert rows_of(log, "c-2") == 2


def test_a_sweep_that_finds_nothing_does_not_wait_for_a_writer(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    try:
        presence = watcher(log, "alive", "c-alive", "ann")
        assert answered_while_another_writes(sqlite_url, presence.sweep) is None
        assert watching(presence) == ["c-alive"]
    finally:
        log.close()


def test_a_connection_subscribing_to_a_stream_again_at_once_is_one_watcher(log: EventLog) -> None:
    presence = watcher(log, "one", "c-1", "ann")
    # Subscribes of one connection that overlap, each from its own thread.
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda _: presence.subscribed("c-1", STREAM), range(32)))
    assert watching(presence) == ["c-1"]
    assert rows_of(log, "c-1") == 2
