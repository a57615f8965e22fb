"""Fan-out reads: how often the live reader of one process reads the log while many
subscribers follow one stream, against one read per subscriber per append (a reader per client).

The fan-out (`gateway_kit.streams.fanout.Hub`) is driven directly, without HTTP: `--subscribers`
subscriptions of one stream, drained as events arrive; each round appends `--appends` events one
at a time, waits until every subscriber has them, and counts the live reader's reads
(`Hub.reads`) over the appends alone (the reads that started it are left out).

- *other process*: the events are appended through a second `EventLog` on the same database,
  standing for another process: its commits are not handed to this process's fan-out, so the
  reader reads them. Goal: at most 3 reads per append (on PostgreSQL an append wakes the reader
  twice, its own commit then the NOTIFY coming back, and a read may meet a row not yet settled).
- *this process*: appended through the reader's own log. A commit that directly follows what the
  reader has handed out is handed to it without a read. On SQLite, where a commit is readable at
  once, the cross-process watcher is kept off and the idle re-check set to ten minutes, so the
  only reads left are those made for the commits: goal at most one for all the appends.

The baseline is what one reader per client would make: subscribers x appends reads. The ratio
is reads / baseline (lower is better).

    .venv/bin/python bench/fanout_reads.py                  # SQLite in a temporary directory
    .venv/bin/python bench/fanout_reads.py --db postgresql://postgres@127.0.0.1:5432/postgres
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from _common import MISS, PASS
from _harness import machine_load

from gateway_kit import EventLog
from gateway_kit.streams.fanout import Hub, Subscription

QUEUE_SIZE = 1000
DELIVERY_TIMEOUT = 30.0  # seconds for every subscriber to have an append
QUIET_RECHECK = 600.0  # seconds: no idle re-check wakes the reader during a round
SETTLE_TIMEOUT = 10.0  # seconds for the reader's first reads to end before counting


@dataclass
class Case:
    name: str
    goal: float  # the most reads per append
    reads: list[int] = field(default_factory=list)  # one per round

    def per_append(self, appends: int) -> float:
        return statistics.median(self.reads) / appends

    def verdict(self, appends: int) -> str:
        return PASS if self.per_append(appends) <= self.goal else MISS


class Followers:
    """`count` subscribers of one stream, each keeping the seqs it was handed."""

    def __init__(self, hub: Hub, stream: str, count: int) -> None:
        self.hub, self.stream, self.count = hub, stream, count
        self.subs: list[Subscription] = []
        self.seen: list[list[int]] = []

    async def start(self) -> None:
        for _ in range(self.count):
            self.subs.append(await self.hub.subscribe(stream=self.stream))
            self.seen.append([])

    async def until_all_have(self, seq: int) -> None:
        deadline = time.monotonic() + DELIVERY_TIMEOUT
        while not all(seen and seen[-1] >= seq for seen in self.drain()):
            if time.monotonic() > deadline:
                raise AssertionError(f"seq {seq} did not reach every subscriber in time")
            await asyncio.sleep(0.001)

    def drain(self) -> list[list[int]]:
        for sub, seen in zip(self.subs, self.seen, strict=True):
            seen.extend(item[0] for item in sub.take())
        return self.seen

    def stop(self) -> None:
        for sub in self.subs:
            self.hub.unsubscribe(sub)


async def until_settled(hub: Hub) -> None:
    """Until the reader has stopped reading: its count holds still across a quiet spell."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        before = hub.reads
        await asyncio.sleep(0.2)
        if hub.reads == before or time.monotonic() > deadline:
            return


async def one_round(log: EventLog, writer: EventLog, subscribers: int, appends: int) -> int:
    stream = f"bench-fanout-{uuid.uuid4().hex[:8]}"
    hub = Hub(log, queue_size=QUEUE_SIZE)
    followers = Followers(hub, stream, subscribers)
    await followers.start()
    first = await writer.aappend(stream, "Message", {"n": 0})
    await followers.until_all_have(first.seq)
    await until_settled(hub)
    before = hub.reads
    for n in range(1, appends + 1):
        event = await writer.aappend(stream, "Message", {"n": n})
        await followers.until_all_have(event.seq)
    reads = hub.reads - before
    followers.stop()
    return reads


def measure(url: str, rounds: int, subscribers: int, appends: int, cases: dict[str, Case]) -> None:
    sqlite = url.startswith("sqlite")
    for number in range(rounds):
        with EventLog(url) as log, EventLog(url) as other:
            reads = asyncio.run(one_round(log, other, subscribers, appends))
            cases["other"].reads.append(reads)
        recheck = QUIET_RECHECK if sqlite else log.idle_recheck
        with EventLog(url, idle_recheck=recheck) as log:
            if sqlite:  # the hand-off alone: no watcher of other processes' commits wakes it
                no_watcher: Callable[[], None] = lambda: None  # noqa: E731
                log._start_watcher = no_watcher  # type: ignore[method-assign]
            reads = asyncio.run(one_round(log, log, subscribers, appends))
            cases["this"].reads.append(reads)
        print(
            f"round {number + 1}: other process {cases['other'].reads[-1]} reads, "
            f"this process {cases['this'].reads[-1]} reads"
        )


def print_results(cases: dict[str, Case], subscribers: int, appends: int) -> None:
    baseline = subscribers * appends
    header = (
        f"{'case':<34} {'reads':>7} {'min-max':>9} {'per append':>11} {'goal':>7} "
        f"{'baseline':>9} {'ratio':>8}  result"
    )
    print(f"\n{subscribers} subscribers, {appends} appends")
    print(header)
    print("-" * len(header))
    for case in cases.values():
        reads = statistics.median(case.reads)
        spread = f"{min(case.reads)}-{max(case.reads)}"
        print(
            f"{case.name:<34} {reads:>7.0f} {spread:>9} {case.per_append(appends):>11.3f} "
            f"{'<=' + format(case.goal, 'g'):>7} {baseline:>9} {reads / baseline:>8.4f}  "
            f"{case.verdict(appends)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", default=None, help="SQLAlchemy URL (default: SQLite in TMP)")
    parser.add_argument("--rounds", type=int, default=5, help="(default %(default)s)")
    parser.add_argument("--subscribers", type=int, default=100, help="(default %(default)s)")
    parser.add_argument("--appends", type=int, default=40, help="(default %(default)s)")
    args = parser.parse_args()
    print(f"At the start: {machine_load()}")
    sqlite = args.db is None or args.db.startswith("sqlite")
    cases = {
        "other": Case("appends of another process", 3.0),
        "this": Case("appends of this process", 1 / args.appends if sqlite else 3.0),
    }
    with tempfile.TemporaryDirectory() as tmp:
        url = args.db or f"sqlite:///{tmp}/fanout.db"
        measure(url, args.rounds, args.subscribers, args.appends, cases)
    print_results(cases, args.subscribers, args.appends)
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
