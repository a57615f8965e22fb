"""Appending and reading: the same behaviour on every backend."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from gateway_kit import Event, EventLog
from tests.support.waiting import Reads, settled


def test_seq_is_global_and_pos_is_per_stream(log: EventLog) -> None:
    a1 = log.append("a", "Message", {"n": 1})
    b1 = log.append("b", "Message", {"n": 2})
    a2 = log.append("a", "Message", {"n": 3})
    assert [a1.seq, b1.seq, a2.seq] == sorted([a1.seq, b1.seq, a2.seq])
    assert len({a1.seq, b1.seq, a2.seq}) == 3
    assert (a1.pos, b1.pos, a2.pos) == (1, 1, 2)


def test_read_returns_what_append_returned(log: EventLog) -> None:
    written = log.append("conv-1", "Message", {"text": "hi"}, run_id="r-1", upstream_event_id="7")
    [read] = log.read(settled=False)
    assert read == written
    assert (read.stream, read.type, read.run_id, read.upstream_event_id) == (
        "conv-1",
        "Message",
        "r-1",
        "7",
    )
    assert read.data == {"text": "hi"}
    assert read.created_at.tzinfo is not None
    assert read.envelope() == {
        "seq": written.seq,
        "stream": "conv-1",
        "pos": 1,
        "run_id": "r-1",
        "type": "Message",
        "data": {"text": "hi"},
        "upstream_event_id": "7",
    }


def test_read_filters_by_stream_and_run_and_pages_by_seq(log: EventLog) -> None:
    for i in range(10):
        log.append("a" if i % 2 else "b", "T", {"i": i}, run_id=f"r{i % 3}")
    settled(log)
    only_a = log.read(stream="a")
    assert [e.data["i"] for e in only_a] == [1, 3, 5, 7, 9]
    assert [e.pos for e in only_a] == [1, 2, 3, 4, 5]
    assert [e.data["i"] for e in log.read(run_id="r0")] == [0, 3, 6, 9]
    first = log.read(limit=4)
    rest = log.read(after=first[-1].seq, limit=100)
    assert [e.data["i"] for e in first + rest] == list(range(10))
    assert log.read(after=log.last_seq()) == []


def test_last_seq(log: EventLog) -> None:
    assert log.last_seq() == 0
    assert log.last_seq("a") == 0
    a = log.append("a", "T")
    b = log.append("b", "T")
    settled(log)
    assert log.last_seq() == b.seq
    assert log.last_seq("a") == a.seq


def test_append_many_keeps_order_and_assigns_positions(log: EventLog) -> None:
    log.append("a", "T")
    events = log.append_many(
        [
            {"stream": "a", "type": "T", "data": {"k": 1}},
            {"stream": "b", "type": "T", "data": {"k": 2}},
            {"stream": "a", "type": "T", "data": {"k": 3}, "run_id": "r"},
        ]
    )
    assert [e.data["k"] for e in events] == [1, 2, 3]
    assert [(e.stream, e.pos) for e in events] == [("a", 2), ("b", 1), ("a", 3)]
    assert [e.seq for e in events] == sorted(e.seq for e in events)
    settled(log)
    assert log.read(after=events[0].seq - 1) == events
    assert log.append_many([]) == []


UNICODE_SAMPLES = [
    "line\u2028separator and paragraph\u2029separator",
    "emoji 😀👩‍💻 and flags 🇨🇳",
    "中文\uff0c带标点\u3002",
    'quote " backslash \\ newline \n tab \t',
    "nul \u0000 inside a string",
    "\ufeffbyte order mark",
]


@pytest.mark.parametrize("text", UNICODE_SAMPLES)
def test_unicode_round_trips_exactly(log: EventLog, text: str) -> None:
    log.append("s", "Message", {"text": text, text: [text]})
    [event] = log.read(settled=False)
    assert event.data == {"text": text, text: [text]}


def test_epoch_is_stable_across_reopen_and_differs_between_logs(
    log_url: str, sqlite_url: str, tmp_path: object
) -> None:
    with EventLog(log_url) as first:
        epoch = first.epoch
        first.append("a", "T")
    with EventLog(log_url) as again:
        assert again.epoch == epoch
        assert [e.pos for e in again.read(settled=False)] == [1]
    with EventLog(f"sqlite:///{tmp_path}/other.db") as other:
        assert other.epoch != epoch


def test_seq_continues_after_reopen(log_url: str) -> None:
    with EventLog(log_url) as first:
        last = first.append("a", "T").seq
    with EventLog(log_url) as again:
        event = again.append("a", "T")
    assert event.seq > last
    assert event.pos == 2


def test_concurrent_threads_get_unique_seqs_and_gapless_positions(log: EventLog) -> None:
    per_thread = 50

    def writer(n: int) -> None:
        for i in range(per_thread):
            log.append(f"s{n % 3}", "T", {"w": n, "i": i})

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    settled(log)
    events = log.read(limit=10_000)
    assert len(events) == 8 * per_thread
    assert [e.seq for e in events] == sorted({e.seq for e in events})
    for stream in ("s0", "s1", "s2"):
        positions = [e.pos for e in events if e.stream == stream]
        assert positions == list(range(1, len(positions) + 1))
    for n in range(8):  # each writer's own events stay in its order
        mine = [e.data["i"] for e in events if e.data["w"] == n]
        assert mine == list(range(per_thread))


def test_latest_finds_the_newest_matching_event(log: EventLog) -> None:
    assert log.latest() is None
    first = log.append("s", "Message", run_id="r1", upstream_event_id="1")
    log.append("s", "Note", run_id="r1")
    third = log.append("s", "Finish", run_id="r1", upstream_event_id="2")
    other = log.append("t", "Message", upstream_event_id="9")
    assert log.latest() == other
    assert log.latest("s") == third
    assert log.latest("s", upstream_only=True) == third
    assert log.latest("s", upstream_only=True, after=third.seq) is None
    assert log.latest("s", upstream_event_id="1") == first
    assert log.latest(run_id="r1", upstream_event_id="9") is None


def test_concurrent_appends_share_transactions(
    log: EventLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Group commit: while one transaction commits, the appends that arrive go in the next."""
    # Only the backend can be slowed like a disk on both databases: nothing public holds a commit.
    backend = log._backend  # type: ignore[attr-defined]
    real_insert = backend.insert
    batch_sizes: list[int] = []

    def slow_insert(batch: list[object], now: float) -> list[Event]:
        batch_sizes.append(len(batch))
        time.sleep(0.01)  # a slow disk: commits take a while
        return real_insert(batch, now)  # type: ignore[no-any-return]

    monkeypatch.setattr(backend, "insert", slow_insert)
    threads = [
        threading.Thread(target=lambda n=n: [log.append(f"s{n}", "T") for _ in range(10)])
        for n in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(batch_sizes) == 80
    assert len(batch_sizes) < 40  # far fewer transactions than appends
    assert max(batch_sizes) > 1


def test_commit_listeners_hear_this_process_commits_where_reads_see_them_at_once(
    log: EventLog,
) -> None:
    heard: list[tuple[int, list[int]]] = []
    remove = log.add_commit_listener(
        lambda token, events: heard.append((token, [e.seq for e in events]))
    )
    first = log.append("s", "T")
    batch = log.append_many([{"stream": "s", "type": "T"}, {"stream": "t", "type": "T"}])
    remove()
    log.append("s", "T")
    if log.url.startswith("sqlite"):
        # The token is the change token the commit set, so a tail can tell what it was told.
        assert [seqs for _, seqs in heard] == [[first.seq], [e.seq for e in batch]]
        assert heard[1][0] == heard[0][0] + 1
        assert heard[1][0] <= log.change_token
    else:
        # PostgreSQL readers keep to settled rows, which a fresh commit may not be yet.
        assert heard == []


def test_two_logs_on_one_database_alternating_on_one_stream_keep_pos_gapless(
    log: EventLog,
) -> None:
    """Each writer must notice the other's appends (another process, in production)."""
    other = EventLog(log.url)
    try:
        written = []
        for i in range(30):
            writer = log if i % 3 else other  # runs of two on one side, then one on the other
            written.append(writer.append("shared", "T", {"i": i}))
        written += other.append_many([{"stream": "shared", "type": "T"}] * 2)
        written.append(log.append("shared", "T"))
    finally:
        other.close()
    assert [e.pos for e in written] == list(range(1, 34))
    assert [e.seq for e in log.read(0, "shared", settled=False)] == [e.seq for e in written]


def test_retention_of_a_stream_s_newest_events_never_hands_their_pos_out_again(
    log: EventLog,
) -> None:
    """Events outside any run are kept; the run after them is deleted: pos goes on from 3."""
    log.append("s", "Message")
    log.append("s", "Message", run_id="r")
    log.append("s", "Finish", run_id="r")
    assert log.prune(older_than=0) == 2
    assert [e.pos for e in log.read(0, "s", settled=False)] == [1]
    assert log.append("s", "Message").pos == 4
    fresh = EventLog(log.url)
    try:
        assert (
            fresh.append_many([{"stream": "s", "type": "T"}, {"stream": "s", "type": "T"}])[0].pos
            == 5
        )
    finally:
        fresh.close()


def test_retention_that_empties_a_stream_never_lets_its_pos_start_again(log: EventLog) -> None:
    """A client that saw pos 1 and 2 must never be sent a different event at pos 1 or 2."""
    log.append("s", "Message", run_id="old")
    log.append("s", "Finish", run_id="old")
    assert log.prune(older_than=0) == 2
    after = log.append("s", "Message", run_id="new")
    fresh = EventLog(log.url)  # another process, which never saw the stream's events
    try:
        also = fresh.append("s", "Message", run_id="new")
    finally:
        fresh.close()
    assert (after.pos, also.pos) == (3, 4)
    log.append("s", "Finish", run_id="new")
    assert log.prune(older_than=0) == 3  # the head recorded again, now higher
    assert log.append_many([{"stream": "s", "type": "T"}, {"stream": "t", "type": "T"}])[0].pos == 6


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://"])
def test_an_in_memory_log_works_and_is_its_own(url: str) -> None:
    """For tests and demos: each EventLog on an in-memory URL has a database of its own."""
    with EventLog(url) as first, EventLog(url) as second:
        written = first.append("s", "Message", {"n": 1})
        assert first.read(0) == [written]
        assert second.read(0) == []
        assert first.epoch != second.epoch

        async def tail_one() -> Event:
            async for event in first.tail(after=written.seq):
                return event
            raise AssertionError("the tail ended")

        async def main() -> Event:
            reads = Reads(first)
            task = asyncio.create_task(tail_one())
            await reads.found_nothing()  # the tail is idle, waiting for a wake-up
            await first.aappend("s", "Message", {"n": 2})
            return await asyncio.wait_for(task, 10)

        assert asyncio.run(main()).data == {"n": 2}
