"""The PostgreSQL log heals by itself when its server restarts: the writer, the readers, the
listener and the announcer reconnect; while the server is down every call raises
`DatabaseUnavailable` at once, and a write whose connection died is never made twice."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
import pytest
import sqlalchemy as sa

from gateway_kit import EventLog
from gateway_kit.coordination.tables import leases
from gateway_kit.exceptions import DatabaseUnavailable
from gateway_kit.log.postgres import conninfo
from gateway_kit.log.reconnect import GATE_MAX
from gateway_kit.log.schema import EVENTS
from tests.support.postgres import PgServer
from tests.support.waiting import until, wait_until

T = TypeVar("T")

# Seconds an outage's call may take to fail: it must not wait for a server that is down.
FAIL_FAST = 2.0
# Seconds within which a commit of another process reaches a tail once the server is back:
# the listener's backoff (2 s at most) and a margin, far below the tail's idle re-check.
DELIVERY_BOUND = 6.0
IDLE_RECHECK = 60.0
# Seconds after the restart within which a call succeeds: a connect that failed just before
# (the server was still starting) makes calls fail without trying for `GATE_MAX` at most.
BACK_WITHIN = GATE_MAX + 1.0


def _fails_fast(call: object) -> DatabaseUnavailable:
    started = time.monotonic()
    with pytest.raises(DatabaseUnavailable) as caught:
        call()  # type: ignore[operator]
    assert time.monotonic() - started < FAIL_FAST
    return caught.value


def once_back(call: Callable[[], T]) -> T:
    """What `call()` gives once the database is back: it may fail (having done nothing) for
    `GATE_MAX` after a connect that failed while the server was starting, never longer."""
    deadline = time.monotonic() + BACK_WITHIN
    while True:
        try:
            return call()
        except DatabaseUnavailable as exc:
            assert "cannot be reached" in str(exc), exc  # refused before trying: not written
            assert time.monotonic() < deadline, "still unavailable after the restart"
            time.sleep(0.02)


def test_the_writer_reconnects_and_an_outage_is_database_unavailable(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    with EventLog(throwaway_pg_url) as log:
        first = log.append("conv", "Message", {"n": 1})
        throwaway_pg.kill()
        _fails_fast(lambda: log.append("conv", "Message", {"n": "lost"}))
        _fails_fast(lambda: log.read())
        _fails_fast(lambda: log.tables.write(leases.delete().where(leases.c.name == "x")))
        with pytest.raises(DatabaseUnavailable), log.tables.transaction() as conn:
            conn.execute(sa.select(leases))
        throwaway_pg.start()
        # The dead connection is not used: the write is not lost with it.
        second = once_back(lambda: log.append("conv", "Message", {"n": 2}))
        log.tables.write(leases.delete().where(leases.c.name == "x"))
        with log.tables.transaction() as conn:
            conn.execute(sa.select(leases))
        assert [e.data for e in log.read(stream="conv")] == [{"n": 1}, {"n": 2}]
        assert second.seq > first.seq and second.pos == 2


def read_once(log: EventLog, answers: list[object]) -> bool:
    """Read, noting the answer; False while the database is (still) unavailable."""
    try:
        answers.append(len(log.read()))
    except DatabaseUnavailable:
        return False
    return True


def test_a_reader_thread_reconnects_after_the_restart(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    with EventLog(throwaway_pg_url) as log:
        log.append("conv", "Message", {"n": 1})
        answers: list[object] = []

        def reads() -> None:
            answers.append(len(log.read()))  # opens this thread's reader connection
            ready.set()
            again.wait(30)
            # Another thread (the listener) may have tried to connect while the server was
            # still starting: calls then fail fast for the short pause after that attempt.
            try:
                wait_until(lambda: read_once(log, answers), timeout=GATE_MAX * 4)
            except Exception as exc:
                answers.append(exc)

        ready, again = threading.Event(), threading.Event()
        thread = threading.Thread(target=reads)
        thread.start()
        assert ready.wait(30)
        throwaway_pg.kill()
        throwaway_pg.start()
        again.set()
        thread.join(30)
        assert answers == [1, 1]


def test_a_write_whose_connection_dies_fails_and_is_not_made_again(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    with EventLog(throwaway_pg_url) as log:
        log.append("conv", "Message", {"n": 1})
        blocker = psycopg.connect(conninfo(throwaway_pg_url))
        try:
            blocker.execute(f"LOCK TABLE {EVENTS} IN ACCESS EXCLUSIVE MODE")
            outcome: list[object] = []

            def append() -> None:
                try:
                    outcome.append(log.append("conv", "Message", {"n": "cut"}))
                except Exception as exc:
                    outcome.append(exc)

            thread = threading.Thread(target=append)
            thread.start()
            # The append waits for the lock; its connection is cut under it.
            with psycopg.connect(throwaway_pg.conninfo, autocommit=True) as admin:
                waiting = "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                wait_until(lambda: admin.execute(waiting).fetchone() is not None, 10)
                (pid,) = admin.execute(waiting).fetchone() or (None,)
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            thread.join(30)
        finally:
            blocker.rollback()
            blocker.close()
        assert len(outcome) == 1 and isinstance(outcome[0], DatabaseUnavailable)
        log.append("conv", "Message", {"n": 2})
        assert [e.data for e in log.read(stream="conv")] == [{"n": 1}, {"n": 2}]


def test_another_process_commits_reach_a_tail_by_notification_after_the_restart(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    """Two logs on one database stand for two processes: the tail's idle re-check is a
    minute, so only a notification (the listener and the announcer both healed) wakes it."""
    writer = EventLog(throwaway_pg_url)
    reader = EventLog(throwaway_pg_url, idle_recheck=IDLE_RECHECK)

    async def delivered(after: int) -> float:
        started = time.monotonic()
        while True:
            seen = reader.change_token
            try:
                if await reader.aread(after):
                    return time.monotonic() - started
            except DatabaseUnavailable:  # read just as the server came back: read again
                await asyncio.sleep(0.02)
                continue
            await reader.wait_for_change(seen, IDLE_RECHECK)

    async def main() -> None:
        head = await reader.alast_seq()
        waiting = asyncio.create_task(delivered(head))
        await until(reader.listening.is_set)  # the tail's first wait starts the listener
        event = await writer.aappend("conv", "Message", {"n": 1})
        assert await asyncio.wait_for(waiting, DELIVERY_BOUND) < DELIVERY_BOUND
        throwaway_pg.kill()
        throwaway_pg.start()
        waiting = asyncio.create_task(delivered(event.seq))
        back = time.monotonic()
        await asyncio.to_thread(once_back, lambda: writer.append("conv", "Message", {"n": 2}))
        await asyncio.wait_for(waiting, DELIVERY_BOUND)
        healed = time.monotonic() - back
        # And once listening again, at a notification's latency.
        latest = await reader.alast_seq()
        waiting = asyncio.create_task(delivered(latest))
        await until(reader.listening.is_set)
        sent = time.monotonic()
        await writer.aappend("conv", "Message", {"n": 3})
        await asyncio.wait_for(waiting, DELIVERY_BOUND)
        latency = time.monotonic() - sent
        print(f"delivery healed {healed:.2f} s after the restart; latency then {latency:.3f} s")
        assert latency < 1.0

    try:
        asyncio.run(main())
    finally:
        writer.close()
        reader.close()
