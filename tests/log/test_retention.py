"""Retention: old finished runs go, active streams stay, seq is never reused."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from gateway_kit import Event, EventLog
from gateway_kit.log import postgres
from gateway_kit.log.postgres import conninfo
from gateway_kit.log.schema import STREAM_LOCK_CLASS
from tests.support.waiting import wait_until


def backdate(log: EventLog, run_id: str, seconds: float) -> None:
    """Make a run's events look `seconds` older than they are."""
    # Through the log's own connection: nothing public writes an event's time, and waiting
    # hours for a run to age is not a test.
    backend = log._backend  # type: ignore[attr-defined]
    conn = backend._writer
    placeholder = "?" if backend.dialect == "sqlite" else "%s"
    conn.execute(
        f"UPDATE gateway_kit_events SET created_at = created_at - {placeholder} "
        f"WHERE run_id = {placeholder}",
        (seconds, run_id),
    )


def run(log: EventLog, stream: str, run_id: str, *, finished: bool = True) -> list[Event]:
    events = [
        log.append(stream, "Message", {"text": "hello"}, run_id=run_id),
        log.append(stream, "Message", {"text": "world"}, run_id=run_id),
    ]
    if finished:
        events.append(log.append(stream, "Finish", {"reason": "stop"}, run_id=run_id))
    return events


def test_prune_deletes_old_finished_runs_only(log: EventLog) -> None:
    run(log, "a", "old")
    run(log, "a", "recent")
    note = log.append("a", "Note")  # not part of any run: kept
    backdate(log, "old", 3 * 86400)
    backdate(log, "recent", 3600)

    assert log.prune(older_than=timedelta(days=1)) == 3
    assert {e.run_id for e in log.read(settled=False)} == {"recent", None}
    assert note in log.read(settled=False)


def test_prune_never_touches_a_stream_with_an_active_run(log: EventLog) -> None:
    run(log, "busy", "done-long-ago")
    run(log, "busy", "still-running", finished=False)
    run(log, "quiet", "done-too")
    for run_id in ("done-long-ago", "still-running", "done-too"):
        backdate(log, run_id, 10 * 86400)

    assert log.prune(older_than=timedelta(days=1)) == 3
    assert {e.run_id for e in log.read(settled=False)} == {"done-long-ago", "still-running"}


def test_error_ends_a_run_for_retention(log: EventLog) -> None:
    log.append("s", "Message", run_id="r")
    log.append("s", "Error", {"error": "boom"}, run_id="r")
    backdate(log, "r", 7200)
    assert log.prune(older_than=3600) == 2


def test_seq_is_never_reused_after_pruning_everything(log: EventLog) -> None:
    events = run(log, "s", "r")
    backdate(log, "r", 7200)
    assert log.prune(older_than=3600) == 3
    assert log.read(settled=False) == []
    fresh = log.append("s", "T")
    assert fresh.seq > events[-1].seq


def test_archive_receives_each_run_before_deletion(log: EventLog) -> None:
    events = run(log, "s", "r")
    backdate(log, "r", 7200)
    archived: list[list[Event]] = []
    assert log.prune(older_than=3600, archive=archived.append) == 3
    assert [[e.seq for e in batch] for batch in archived] == [[e.seq for e in events]]


def test_failing_archive_deletes_nothing(log: EventLog) -> None:
    run(log, "s", "r1")
    run(log, "s", "r2")
    backdate(log, "r1", 7200)
    backdate(log, "r2", 7200)
    calls: list[str | None] = []

    def archive(batch: list[Event]) -> None:
        calls.append(batch[0].run_id)
        if len(calls) == 2:
            raise OSError("archive disk full")

    with pytest.raises(OSError, match="archive disk full"):
        log.prune(older_than=3600, archive=archive)
    assert len(log.read(settled=False)) == 6


def test_negative_age_is_refused(log: EventLog) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        log.prune(older_than=-1)


def test_pruning_the_newest_events_does_not_lower_the_head(log: EventLog) -> None:
    events = run(log, "s", "r")
    backdate(log, "r", 7200)
    log.prune(older_than=3600)
    assert log.read(settled=False) == []
    assert log.last_seq() == events[-1].seq  # a client holding that cursor is not "beyond"


def test_prune_waits_for_an_append_in_flight_to_the_stream(pg_url: str) -> None:
    """A run starting in a stream while retention looks at it is seen, not raced: an append
    still committing holds its stream, and retention waits for it before deciding."""
    with EventLog(pg_url) as log:
        run(log, "s", "old")
        backdate(log, "old", 7200)
        starting = psycopg.connect(conninfo(pg_url))  # not autocommit: the append stays open
        try:
            starting.execute("SELECT gateway_kit_append_one('s', 'new', 'Message', '{}', NULL, 0)")
            pruned: list[int] = []
            pruner = threading.Thread(target=lambda: pruned.append(log.prune(older_than=3600)))
            pruner.start()
            wait_until(lambda: waiting_for_stream_lock(pg_url, "s"))
            starting.commit()
            pruner.join(10)
        finally:
            starting.close()
        assert not pruner.is_alive()
        assert pruned == [0]  # the stream has an active run now
        assert {e.run_id for e in log.read(settled=False)} == {"old", "new"}


def waiting_for_stream_lock(url: str, stream: str) -> bool:
    """Whether a session waits for `stream`'s lock (an advisory lock on two int4 keys shows
    the first as classid and the second as objid)."""
    with psycopg.connect(conninfo(url)) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
            "AND classid = %s AND objsubid = 2 AND objid = hashtext(%s)::oid",
            (STREAM_LOCK_CLASS, stream),
        ).fetchone()
    assert row is not None
    return int(row[0]) > 0


def test_prune_goes_a_few_streams_at_a_time_and_keeps_a_run_s_streams_together(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On PostgreSQL each transaction locks the streams it prunes; a prune of many streams
    is split so as not to fill the server's lock table. The outcome is the same."""
    monkeypatch.setattr(postgres, "PRUNE_STREAMS_PER_TRANSACTION", 2)
    for n in range(5):
        run(log, f"s{n}", f"r{n}")
    log.append("t1", "Message", run_id="spread")  # one run over two streams
    log.append("t2", "Finish", run_id="spread")
    for run_id in [f"r{n}" for n in range(5)] + ["spread"]:
        backdate(log, run_id, 7200)
    keep = log.append("t3", "Note")
    assert log.prune(older_than=3600) == 5 * 3 + 2
    assert log.read(settled=False) == [keep]


def test_stream_groups_stay_under_the_limit_without_splitting_a_run() -> None:
    runs = [{"a"}, {"b", "c"}, {"d"}, {"e", "f", "g"}, {"h"}]
    groups = list(postgres.stream_groups(runs, 3))
    assert groups == [{"a", "b", "c"}, {"d"}, {"e", "f", "g"}, {"h"}]
    assert list(postgres.stream_groups([{"x", "y", "z"}], 2)) == [{"x", "y", "z"}]
    assert list(postgres.stream_groups([], 2)) == []


def test_pruning_never_lowers_the_head_another_prune_recorded(log: EventLog) -> None:
    """Retention in another process may have deleted newer events and recorded a higher
    head; a later prune here records its own newest seq only if it is higher."""
    events = run(log, "s", "r")
    backdate(log, "r", 7200)
    # What the other process's prune recorded, written as it would write it: nothing public
    # records a head.
    backend = log._backend  # type: ignore[attr-defined]
    placeholder = "?" if backend.dialect == "sqlite" else "%s"
    backend._writer.execute(
        f"INSERT INTO gateway_kit_meta (key, value) VALUES ('pruned_seq', {placeholder})",
        (str(events[-1].seq + 100),),
    )
    assert log.prune(older_than=3600) == 3
    assert log.last_seq() == events[-1].seq + 100
