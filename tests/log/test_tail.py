"""`tail`: replay, then live, with nothing missed or repeated, in one process or across several."""

from __future__ import annotations

import asyncio
import sys
import threading
import time

import psycopg
import pytest

from gateway_kit import Event, EventLog
from gateway_kit.log import postgres
from gateway_kit.log.schema import NOTIFY_CHANNEL
from tests.support.waiting import Reads, until, wait_until

APPEND_SCRIPT = """
import sys
from gateway_kit import EventLog
with EventLog(sys.argv[1]) as log:
    for i in range(int(sys.argv[3])):
        log.append(sys.argv[2], "FromOtherProcess", {"i": i})
"""


async def collect(log: EventLog, count: int, timeout: float, **kwargs: object) -> list[Event]:
    seen: list[Event] = []

    async def run() -> None:
        async for event in log.tail(**kwargs):  # type: ignore[arg-type]
            seen.append(event)
            if len(seen) == count:
                return

    await asyncio.wait_for(run(), timeout)
    return seen


def test_tail_replays_then_goes_live_without_gap_or_duplicate(log: EventLog) -> None:
    for i in range(25):
        log.append("s", "T", {"i": i})

    async def main() -> list[Event]:
        stop = threading.Event()

        def writer() -> None:
            for i in range(25, 100):
                log.append("s", "T", {"i": i})
                if i % 10 == 0:
                    time.sleep(0.01)
            stop.set()

        task = asyncio.create_task(collect(log, 100, timeout=30))
        await asyncio.sleep(0)  # the tail starts replaying while the writer runs
        thread = threading.Thread(target=writer)
        thread.start()
        try:
            return await task
        finally:
            await asyncio.to_thread(thread.join)

    events = asyncio.run(main())
    assert [e.data["i"] for e in events] == list(range(100))


def test_tail_resumes_after_cursor_and_filters_stream(log: EventLog) -> None:
    a = [log.append("a", "T", {"i": i}) for i in range(5)]
    log.append("b", "T", {"i": 99})

    async def main() -> list[Event]:
        reads = Reads(log)
        task = asyncio.create_task(collect(log, 3, timeout=10, after=a[2].seq, stream="a"))
        await reads.found_nothing()  # replayed a's events after the cursor, and waits
        await log.aappend("b", "T", {"i": 100})
        await log.aappend("a", "T", {"i": 5})
        return await task

    assert [e.data["i"] for e in asyncio.run(main())] == [3, 4, 5]


# These tails never re-check on their own: an event reaches them only through a wake-up.
NO_RECHECK = 3600.0


def test_an_in_process_append_wakes_an_idle_tail(log_url: str) -> None:
    with EventLog(log_url, idle_recheck=NO_RECHECK) as event_log:

        async def main() -> list[Event]:
            reads = Reads(event_log)
            task = asyncio.create_task(collect(event_log, 1, timeout=20))
            await reads.found_nothing()  # the tail is idle now, waiting for a notification
            await event_log.aappend("s", "T")
            return await task

        assert [e.type for e in asyncio.run(main())] == ["T"]


def test_appends_of_another_process_wake_an_idle_tail(log_url: str) -> None:
    """SQLite through PRAGMA data_version, PostgreSQL through LISTEN/NOTIFY."""
    with EventLog(log_url, idle_recheck=NO_RECHECK) as event_log:

        async def main() -> list[Event]:
            reads = Reads(event_log)
            task = asyncio.create_task(collect(event_log, 20, timeout=20, stream="x"))
            await reads.found_nothing()  # idle: only a wake-up can bring the other's events
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-c", APPEND_SCRIPT, event_log.url, "x", "20"
            )
            assert await proc.wait() == 0
            return await task

        events = asyncio.run(main())
    assert [e.data["i"] for e in events] == list(range(20))


def test_a_lost_notification_is_made_up_by_the_idle_recheck(log_url: str) -> None:
    with EventLog(log_url, idle_recheck=0.2) as event_log:
        # No watcher: the only way to lose the notification of another process's commit.
        event_log._start_watcher = lambda: None  # type: ignore[method-assign]

        async def main() -> list[Event]:
            reads = Reads(event_log)
            task = asyncio.create_task(collect(event_log, 1, timeout=10))
            await reads.found_nothing()
            # written behind the log's back (its backend: no public append is silent), so no
            # notification reaches the tail
            other = EventLog(log_url)
            other._backend.insert(  # type: ignore[attr-defined]
                [event_log._prepare({"stream": "s", "type": "Quiet"})], time.time()
            )
            other.close()
            return await task

        assert [e.type for e in asyncio.run(main())] == ["Quiet"]


def test_two_subprocess_writers_and_a_tail_see_every_event_once(log: EventLog) -> None:
    """SQLite with several processes on one file, PostgreSQL with several connections."""

    async def main() -> list[Event]:
        task = asyncio.create_task(collect(log, 400, timeout=60))
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", APPEND_SCRIPT, log.url, f"w{n}", "200"
            )
            for n in range(2)
        ]
        for proc in procs:
            assert await proc.wait() == 0
        return await task

    events = asyncio.run(main())
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    for n in range(2):
        assert [e.data["i"] for e in events if e.stream == f"w{n}"] == list(range(200))
        assert [e.pos for e in events if e.stream == f"w{n}"] == list(range(1, 201))


def test_closing_the_log_ends_idle_tails(log_url: str) -> None:
    event_log = EventLog(log_url)

    async def main() -> BaseException | None:
        reads = Reads(event_log)
        task = asyncio.create_task(collect(event_log, 1, timeout=10))
        await reads.found_nothing()  # the tail waits for a wake-up when the log closes
        event_log.close()
        try:
            await task
        except BaseException as exc:
            return exc
        return None

    error = asyncio.run(main())
    assert type(error).__name__ == "LogClosed"


def test_closing_a_postgresql_log_announces_its_last_appends(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process that appends and exits at once must still wake the other processes' tails."""
    monkeypatch.setattr(postgres, "ANNOUNCE_INTERVAL", 0.3)  # its pause after each NOTIFY
    listener = psycopg.connect(postgres.conninfo(pg_url), autocommit=True)
    try:
        listener.execute(postgres.LISTENING_SQL)  # as a tail's watcher does
        listener.execute(f"LISTEN {NOTIFY_CHANNEL}")
        with EventLog(pg_url) as writer:
            writer.append("s", "First")
            assert heard(listener, timeout=5.0) == 1
            writer.append("s", "Last")  # during the pause: due with the next NOTIFY
        assert heard(listener, timeout=5.0) == 1
    finally:
        listener.close()


def test_no_notify_is_sent_while_no_process_listens_to_the_log(pg_url: str) -> None:
    eavesdropper = psycopg.connect(postgres.conninfo(pg_url), autocommit=True)
    try:
        eavesdropper.execute(f"LISTEN {NOTIFY_CHANNEL}")  # without the listeners' lock
        with EventLog(pg_url) as writer:
            writer.append("s", "Unheard")
            assert heard(eavesdropper, timeout=0.3) == 0
            with EventLog(pg_url) as tailing:
                after = tailing.last_seq()
                tail = threading.Thread(
                    target=lambda: asyncio.run(collect(tailing, 1, timeout=20, after=after))
                )
                tail.start()
                wait_until(lambda: listeners(eavesdropper))  # a tail that found nothing listens
                # The writer found nobody listening a moment ago; it looks again soon.
                writer.append("s", "Heard")
                assert heard(eavesdropper, timeout=5.0) == 1
                tail.join(20)  # woken, it read "Heard" and ended
                assert not tail.is_alive()
    finally:
        eavesdropper.close()


def test_the_log_of_another_schema_does_not_wake_this_ones_tails(
    pg_url: str, other_pg_url: str
) -> None:
    with (
        EventLog(pg_url, idle_recheck=NO_RECHECK) as ours,
        EventLog(other_pg_url, idle_recheck=NO_RECHECK) as theirs,
    ):

        async def main() -> tuple[list[Event], list[Event], int]:
            our_reads, their_reads = Reads(ours), Reads(theirs)
            our_tail = asyncio.create_task(collect(ours, 1, timeout=20))
            their_tail = asyncio.create_task(collect(theirs, 1, timeout=20))
            await our_reads.found_nothing()
            await their_reads.found_nothing()
            await until(lambda: ours.listening.is_set() and theirs.listening.is_set())
            woken = ours.change_token  # moves with every wake-up our log's listener gives
            with EventLog(other_pg_url) as writer:  # another process of the other deployment
                writer.append("s", "Theirs")
            their_events = await their_tail  # woken by its NOTIFY, which ours heard too
            woken_by_theirs = ours.change_token - woken
            with EventLog(pg_url) as writer:
                writer.append("s", "Ours")
            return their_events, await our_tail, woken_by_theirs

        their_events, our_events, woken_by_theirs = asyncio.run(main())

    assert [e.type for e in their_events] == ["Theirs"]
    assert woken_by_theirs == 0  # the other schema's NOTIFY woke nothing here
    assert [e.type for e in our_events] == ["Ours"]  # our own still does


def heard(conn: psycopg.Connection[object], *, timeout: float) -> int:
    """How many NOTIFYs of this schema's log `conn` hears, stopping at the first or at
    `timeout`: the logs of other schemas (another suite on the same server) notify too."""
    ours = postgres.schema_of(conn)  # type: ignore[arg-type]
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        for notification in conn.notifies(timeout=left, stop_after=1):
            if notification.payload == ours:
                return 1
    return 0


def listeners(conn: psycopg.Connection[object]) -> int:
    row = conn.execute(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ShareLock' "
        "AND classid = %s AND objid = hashtext(current_schema())::oid",
        (postgres.LISTENER_LOCK_CLASS,),
    ).fetchone()
    return 0 if row is None else int(row[0])


def test_a_tail_woken_while_an_older_transaction_runs_gets_the_event_once_it_ends(
    pg_url: str,
) -> None:
    """The event is committed but held back from readers by another transaction; when that
    one ends no notification comes, yet the tail delivers it without its idle re-check."""
    with EventLog(pg_url, idle_recheck=NO_RECHECK) as event_log:
        older = psycopg.connect(postgres.conninfo(pg_url))  # stays in its transaction
        try:

            async def main() -> list[Event]:
                reads = Reads(event_log)
                task = asyncio.create_task(collect(event_log, 1, timeout=20))
                await reads.found_nothing()  # the tail is idle now, waiting for a notification
                older.execute("SELECT pg_current_xact_id()")
                before = len(reads.answers)
                written = await event_log.aappend("s", "HeldBack")
                # the tail was woken and found nothing it may read
                await reads.found_nothing(since=before)
                assert await event_log.aread(settled=False) == [written]
                older.rollback()
                return await task

            assert [e.type for e in asyncio.run(main())] == ["HeldBack"]
        finally:
            older.close()
