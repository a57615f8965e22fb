"""A run's end: its terminal event, written at most once with the rows that go with it."""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import psycopg
import pytest
import sqlalchemy as sa

from gateway_kit import EventLog, InvalidEvent
from gateway_kit.log.transaction import Transaction

NOTES = sa.table("run_notes", sa.column("run_id", sa.Text), sa.column("note", sa.Text))


@pytest.fixture
def notes(log: EventLog) -> EventLog:
    """The log, with a table beside it for rows written in a run end's transaction."""
    with log.tables.transaction() as conn:
        conn.execute(sa.text("CREATE TABLE run_notes (run_id TEXT PRIMARY KEY, note TEXT)"))
    return log


def note(run_id: str, text: str) -> object:
    def also(transaction: Transaction, events: object) -> None:
        transaction.execute(NOTES.insert().values(run_id=run_id, note=text))

    return also


def written_notes(log: EventLog) -> list[tuple[str, str]]:
    with log.tables.engine.connect() as conn:
        return [tuple(row) for row in conn.execute(sa.select(NOTES.c.run_id, NOTES.c.note))]


def test_a_run_ends_once_with_its_rows_in_the_same_transaction(notes: EventLog) -> None:
    notes.append("conv", "Message", {"n": 1}, run_id="r1")
    before = [{"stream": "conv", "type": "guard_failed", "data": {"reasons": ["x"]}}]
    end = notes.end_run("conv", "Finish", {"ok": True}, run_id="r1", before=before,
                        also=note("r1", "finished"))  # fmt: skip
    assert end is not None and end.type == "Finish" and end.run_id == "r1"
    again = notes.end_run("conv", "Error", {"late": True}, run_id="r1", also=note("r1", "x"))
    assert again is None
    assert [e.type for e in notes.read(run_id="r1", settled=False)] == [
        "Message",
        "guard_failed",
        "Finish",
    ]
    assert notes.run_end("r1") == end
    assert written_notes(notes) == [("r1", "finished")]


def test_a_run_the_app_ended_itself_is_not_ended_again(notes: EventLog) -> None:
    notes.append("conv", "Error", {"error": "boom"}, run_id="r1")
    assert notes.end_run("conv", "Finish", run_id="r1", also=note("r1", "x")) is None
    assert written_notes(notes) == []


def test_when_the_rows_fail_nothing_of_the_end_is_written(notes: EventLog) -> None:
    notes.end_run("conv", "Finish", run_id="r0", also=note("dup", "first"))

    with pytest.raises((sqlite3.IntegrityError, psycopg.errors.UniqueViolation)):
        notes.end_run("conv", "Finish", run_id="r1", before=[{"stream": "conv", "type": "Note"}],
                      also=note("dup", "second"))  # fmt: skip
    assert notes.read(run_id="r1", settled=False) == [] and notes.run_end("r1") is None
    assert notes.end_run("conv", "Error", run_id="r1") is not None  # the run can still end


def test_only_finish_or_error_ends_a_run_and_bad_input_writes_nothing(notes: EventLog) -> None:
    with pytest.raises(InvalidEvent):
        notes.end_run("conv", "Message", run_id="r1")
    with pytest.raises(InvalidEvent):
        notes.end_run("conv", "Finish", run_id="r1", before=[{"stream": "", "type": "Note"}])
    with pytest.raises(InvalidEvent):
        notes.end_run("conv", "Finish", run_id="")
    assert notes.last_seq() == 0


def end(
    log: EventLog, run_id: str, n: int, barrier: threading.Barrier, ended: list[object]
) -> None:
    barrier.wait()
    ended.append(log.end_run("conv", "Finish", {"by": n}, run_id=run_id))


def test_two_processes_ending_one_run_write_one_terminal_event(log_url: str) -> None:
    """Two logs on one database stand for two gateway processes; each ends the run in many
    threads at once."""
    logs = [EventLog(log_url), EventLog(log_url)]
    try:
        for run in range(5):
            run_id = f"r{run}"
            logs[0].append("conv", "Message", run_id=run_id)
            barrier = threading.Barrier(8)
            ended: list[object] = []
            threads = [
                threading.Thread(target=end, args=(logs[n % 2], run_id, n, barrier, ended))
                for n in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sum(e is not None for e in ended) == 1
            assert [e.type for e in logs[1].read(run_id=run_id, settled=False)] == [
                "Message",
                "Finish",
            ]
    finally:
        for log in logs:
            log.close()


def test_the_async_twin_ends_a_run_once_too(notes: EventLog) -> None:
    async def main() -> tuple[object, object]:
        first = await notes.aend_run("conv", "Error", {"error": "x"}, run_id="r1",
                                     also=note("r1", "failed"))  # fmt: skip
        second = await notes.aend_run("conv", "Finish", run_id="r1")
        return first, second

    first, second = asyncio.run(main())
    assert first is not None and second is None
    assert written_notes(notes) == [("r1", "failed")]
