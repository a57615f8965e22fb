"""Event log on SQLite: gateway_kit's EventLog against raw sqlite3 doing the same work.

Both sides write files in the same temporary directory with the same settings (WAL,
synchronous=FULL, the same table and indexes) and build and encode the same rows inside the timed
part. Each round measures both sides, alternating which goes first; the table shows the median of
the per-round ratios, because a noisy machine slows both sides of one round alike.

    .venv/bin/python bench/log_sqlite.py                 # about 40 seconds on 2 cores
    .venv/bin/python bench/log_sqlite.py --rounds 9 --scale 4 --dir /var/tmp
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

import _sqlite_raw as raw
from _common import RUN_ID, STREAM, TYPE, Case, payload, print_table, rate

from gateway_kit import EventLog

THREADS = 8
STREAMS = [f"conv-{i}" for i in range(THREADS)]
BATCH = 100  # rows per commit of the raw "physical best", and events per append_many call
REPLAY_EVENTS = 100_000
REPLAY_PAGE = 1000
GK_EVENTS = "gateway_kit_events"


class Workdir:
    """Fresh database files, one per measurement, in one temporary directory."""

    def __init__(self, parent: str | None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="gk-bench-", dir=parent)
        self.path = Path(self._tmp.name)

    def new_file(self, label: str) -> Path:
        return self.path / f"{label}-{uuid.uuid4().hex[:8]}.db"

    def cleanup(self) -> None:
        self._tmp.cleanup()


def open_log(path: Path) -> EventLog:
    return EventLog(f"sqlite:///{path}")


# --- gateway_kit's side: each case returns the seconds its events took -------------------


def gk_single(path: Path, events: int) -> float:
    log = open_log(path)
    try:
        start = time.perf_counter()
        for i in range(events):
            log.append(stream=STREAM, type=TYPE, data=payload(i), run_id=RUN_ID)
        return time.perf_counter() - start
    finally:
        log.close()


def run_threads(count: int, work: Callable[[int], None]) -> float:
    """Run `work(index)` in `count` threads released together; seconds until the last ends."""
    gate = threading.Barrier(count + 1)
    errors: list[BaseException] = []

    def body(index: int) -> None:
        gate.wait()
        try:
            work(index)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    gate.wait()
    start = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return elapsed


def gk_concurrent(path: Path, per_thread: int) -> float:
    log = open_log(path)

    def writer(index: int) -> None:
        stream = f"conv-{index}"
        for i in range(per_thread):
            log.append(stream=stream, type=TYPE, data=payload(i), run_id=RUN_ID)

    try:
        return run_threads(THREADS, writer)
    finally:
        log.close()


def gk_append_many(path: Path, events: int) -> float:
    log = open_log(path)
    try:
        start = time.perf_counter()
        for first in range(0, events, BATCH):
            log.append_many(
                [
                    {"stream": STREAM, "type": TYPE, "data": payload(i), "run_id": RUN_ID}
                    for i in range(first, min(first + BATCH, events))
                ]
            )
        return time.perf_counter() - start
    finally:
        log.close()


def fill_for_replay(path: Path, events: int) -> EventLog:
    """The events raw.fill writes, spread over the same streams."""
    log = open_log(path)
    for first in range(0, events, REPLAY_PAGE):
        log.append_many(
            {"stream": STREAMS[i % THREADS], "type": TYPE, "data": payload(i), "run_id": RUN_ID}
            for i in range(first, first + REPLAY_PAGE)
        )
    return log


def gk_replay(log: EventLog, events: int) -> float:
    start = time.perf_counter()
    seen, after = 0, 0
    while page := log.read(after=after, limit=REPLAY_PAGE):
        seen += len(page)
        after = page[-1].seq
    elapsed = time.perf_counter() - start
    assert seen == events, (seen, events)
    return elapsed


# --- driver --------------------------------------------------------------------------------


def measure(
    case: Case, events: int, ours: Callable[[], float], theirs: Callable[[], float], rnd: int
) -> None:
    # Alternate who goes first, so neither side always gets the warmer (or busier) machine.
    if rnd % 2 == 0:
        ours_s, theirs_s = ours(), theirs()
    else:
        theirs_s, ours_s = theirs(), ours()
    case.add(rate(events, ours_s), rate(events, theirs_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per case (default 5)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every event count")
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    args = parser.parse_args()

    single_n = int(2000 * args.scale)
    per_thread = int(2500 * args.scale)
    concurrent_n = per_thread * THREADS
    many_n = max(BATCH, int(20_000 * args.scale) // BATCH * BATCH)
    replay_n = max(REPLAY_PAGE, int(REPLAY_EVENTS * args.scale) // REPLAY_PAGE * REPLAY_PAGE)

    single = Case(f"single append ({single_n:,}, 1/commit)", 0.50)
    concurrent = Case(f"{THREADS} threads x 1/call vs raw {BATCH}/commit ({concurrent_n:,})", 0.60)
    same_batch = Case(f"{THREADS} threads x 1/call vs raw {THREADS}/commit", None)
    many = Case(f"append_many({BATCH}) vs raw {BATCH}/commit ({many_n:,})", None)
    replay = Case(f"replay {replay_n:,} (read pages of {REPLAY_PAGE:,})", 0.50)
    commits: list[int] = []

    work = Workdir(args.dir)
    print(f"SQLite {sqlite3.sqlite_version}, files in {work.path}, {args.rounds} rounds")
    try:
        replay_log = fill_for_replay(work.new_file("gk-replay"), replay_n)
        replay_conn = raw.fill(work.new_file("raw-replay"), replay_n, STREAMS)
        for rnd in range(args.rounds):
            new = work.new_file
            measure(
                single,
                single_n,
                partial(gk_single, new("gk-single"), single_n),
                partial(raw.single, new("raw-single"), single_n),
                rnd,
            )
            gk_file = new("gk-concurrent")
            measure(
                concurrent,
                concurrent_n,
                partial(gk_concurrent, gk_file, per_thread),
                partial(raw.batched, new("raw-batched"), concurrent_n, BATCH, STREAMS),
                rnd,
            )
            commits.append(raw.commits_in(gk_file, GK_EVENTS))
            small = raw.batched(new("raw-small"), concurrent_n, THREADS, STREAMS)
            same_batch.add(concurrent.ours[-1], rate(concurrent_n, small))
            measure(
                many,
                many_n,
                partial(gk_append_many, new("gk-many"), many_n),
                partial(raw.batched, new("raw-many"), many_n, BATCH, [STREAM]),
                rnd,
            )
            measure(
                replay,
                replay_n,
                partial(gk_replay, replay_log, replay_n),
                partial(raw.replay, replay_conn, replay_n),
                rnd,
            )
            print(f"  round {rnd + 1}/{args.rounds} done", flush=True)
        replay_log.close()
        replay_conn.close()
    finally:
        work.cleanup()

    per_commit = concurrent_n / statistics.median(commits)
    ceiling = statistics.median(same_batch.theirs) / statistics.median(concurrent.theirs)
    concurrent.notes += [
        f"group commit: {per_commit:.1f} appends per commit (at most {THREADS} can be waiting)",
        f"ceiling: raw {THREADS}/commit reaches {ceiling:.0%} of raw {BATCH}/commit",
    ]
    print_table(
        "gateway_kit EventLog vs raw sqlite3 (WAL, synchronous=FULL)",
        [single, concurrent, same_batch, many, replay],
        "gateway_kit",
        "raw",
        unit="events/s",
        percent=True,
    )


if __name__ == "__main__":
    main()
