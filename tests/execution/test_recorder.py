"""What one process's recorder writes, and when: a window of changes in one write, the newest
answer of a session rather than every one, open requests once they last; and it heals by
itself when its database comes back."""

from __future__ import annotations

import asyncio

from gateway_kit import EventLog
from gateway_kit.execution.recorder import ExecutionRecorder
from gateway_kit.execution.request_rows import RequestRows
from gateway_kit.execution.state import Outcome, State, fold
from tests.support.postgres import PgServer
from tests.support.waiting import until

TMUX = "agent-1"


class Counting(RequestRows):
    """Request rows that count what each write carried."""

    def __init__(self, log: EventLog) -> None:
        super().__init__(log)
        self.writes: list[list[str]] = []

    def write(self, records, *, process, now):  # type: ignore[no-untyped-def]
        super().write(records, process=process, now=now)
        self.writes.append([record.request_id for record in records])


def test_short_requests_of_one_session_in_one_window_are_one_row(log: EventLog) -> None:
    async def scenario() -> None:
        rows = Counting(log)
        recorder = ExecutionRecorder(rows, window=0.2)
        for number in range(50):
            recorder.started(f"r{number}", TMUX, "POST", "/v1/chat/completions")
            recorder.ended(f"r{number}", Outcome.COMPLETED, finish_reason="stop", terminal=True)
        recorder.started("other", "agent-2", "GET", "/status")
        recorder.ended("other", Outcome.COMPLETED)
        await until(lambda: rows.writes, 5)
        assert sorted(rows.writes[0]) == ["other", "r49"]  # the newest answer of each session
        state = fold(TMUX, rows.read(TMUX, recorder.clock()), recorder.clock())
        assert (state.state, state.last_request_id) == (State.IDLE, "r49")
        await recorder.stop()

    asyncio.run(scenario())


def test_a_request_that_lasts_is_written_open_and_then_ended(log: EventLog) -> None:
    async def scenario() -> None:
        rows = Counting(log)
        recorder = ExecutionRecorder(rows, window=0.05)
        recorder.started("long", TMUX, "POST", "/v1/chat/completions")
        recorder.sse_opened("long")

        def open_in_database() -> bool:
            found = rows.read(TMUX, recorder.clock())
            return bool(found) and found[0].open

        await until(open_in_database, 5)  # other processes see it streaming, unflushed
        recorder.ended("long", Outcome.CLIENT_CLOSED)
        await until(lambda: not open_in_database(), 5)
        assert rows.read(TMUX, recorder.clock())[0].outcome == "client_closed"
        await recorder.stop()

    asyncio.run(scenario())


def test_a_request_written_open_is_written_ended_though_a_newer_one_ended_after_it(
    log: EventLog,
) -> None:
    # Of a session's requests that end in one window only the newest is written, unless an
    # older one's row is in the database open: left so, the session would stream for ever.
    async def scenario() -> None:
        recorder = ExecutionRecorder(RequestRows(log), window=60.0)
        recorder.started("long", TMUX, "GET", "/v1/stream")
        assert await recorder.flush()
        recorder.ended("long", Outcome.CLIENT_CLOSED)
        recorder.started("short", TMUX, "POST", "/v1/chat/completions")
        recorder.ended("short", Outcome.COMPLETED, finish_reason="stop", terminal=True)
        assert await recorder.flush()
        written = {r.request_id: r for r in recorder.rows.read(TMUX, recorder.clock())}
        assert written["long"].outcome == "client_closed"
        assert written["short"].finish_reason == "stop"
        await recorder.stop()

    asyncio.run(scenario())


def test_flush_writes_a_request_that_just_started(log: EventLog) -> None:
    async def scenario() -> None:
        recorder = ExecutionRecorder(RequestRows(log), window=60.0)
        recorder.started("new", TMUX, "POST", "/v1/chat/completions")
        assert await recorder.flush()
        assert [r.request_id for r in recorder.rows.read(TMUX, recorder.clock())] == ["new"]
        await recorder.stop()

    asyncio.run(scenario())


def test_the_recorder_heals_when_its_database_comes_back(
    throwaway_pg: PgServer, throwaway_pg_url: str
) -> None:
    log = EventLog(throwaway_pg_url)
    try:

        async def scenario() -> None:
            recorder = ExecutionRecorder(RequestRows(log), window=0.02)
            recorder.started("before", TMUX, "POST", "/x")
            assert await recorder.flush()
            await asyncio.to_thread(throwaway_pg.kill)
            recorder.ended("before", Outcome.COMPLETED, finish_reason="tool_calls")
            recorder.started("during", TMUX, "POST", "/x")
            assert not await recorder.flush(timeout=0.5)  # the database is away
            await asyncio.to_thread(throwaway_pg.start)
            await until(recorder.flush, 30)  # nothing was lost meanwhile
            written = {r.request_id: r for r in recorder.rows.read(TMUX, recorder.clock())}
            assert written["before"].finish_reason == "tool_calls"
            assert written["during"].open
            await recorder.stop()

        asyncio.run(scenario())
    finally:
        log.close()
