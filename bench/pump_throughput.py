"""Pump throughput: goose events per second from the fake goose into the log, through the
session pump and the run lifecycle, against `EventLog.append_many` writing the same events.

gateway_kit's side is a whole run as the gateway makes it, in process, with goose at full
speed: `RunService.start` records the run and sends goose the reply, and the fake goose plays
the whole turn into its replay buffer; then the session's pump starts, connects to the fake
goose's event stream (`FakeGoose` in process, through `StreamingASGITransport` and httpx-sse),
which sends the buffered turn at once, and appends the events as they are parsed; the
lifecycle asks five no-op `finish_guard`s before it appends the run's own `Finish` with its
status and bill. Timed: from starting the pump to the commit of the run's terminal event (a
commit listener of the log notes the time): connecting, parsing every frame, routing it to
its run, writing it, and the lifecycle.

The baselines write the same event dicts (the run's events as the pump stored them:
`RunStarted`, every goose event, `UpstreamFinish`, the run's `Finish`) into a fresh log file
of the same backend, JSON-encoding them inside the timed part:

- ``append_many``: one call per run, all its events in one transaction (the goal);
- ``append``: one call per event from one thread, each its own commit;
- ``aappend``: one awaited call per event from the event loop (the pump's own append path);
- goose alone: the fake goose sending the same buffered turn to a `GooseEventStream` that
  appends nothing (what connecting and parsing the events costs by itself).

Each round measures every side, in an order reversed every other round; the ratios are medians
of per-round ratios. The fake goose's replay buffer and subscriber queue are sized to hold a
whole run: at full speed it publishes faster than the pump appends, and with goose's sizes
(512 and 256) it would drop the pump, which would then recover the turn from
`GET /sessions/{id}` instead of appending each event.

    .venv/bin/python bench/pump_throughput.py            # about 1.5 minutes on 2 cores
    .venv/bin/python bench/pump_throughput.py --rounds 9 --events 5000 --runs 2
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from _common import Case, NoopGuard, encode, print_table, rate
from _harness import machine_load

from gateway_kit import Event, EventLog, Gateway, GooseUpstream
from gateway_kit.log.event import FINISH
from gateway_kit.testing import DEFAULT_BASE_URL, FakeGoose, Turn

STREAM = "conv-1"
MESSAGE = "Tell me about foxes."
TEXT = "The quick brown fox jumps over the lazy dog while the cat watches from the wall"
WORDS = TEXT.split(" ")
QUEUE_MARGIN = 64  # goose events the fake may hold beyond one run's
RUN_TIMEOUT = 120.0  # seconds one run may take before the round is given up


def chunks(count: int) -> list[str]:
    """`count` streamed pieces of an answer, one to three words each, as a model sends them."""
    pieces = []
    for i in range(count):
        size = 1 + i % 3
        pieces.append(" ".join(WORDS[(i + k) % len(WORDS)] for k in range(size)) + " ")
    return pieces


def answer_turn(events: int) -> Turn:
    """A turn of `events` goose events: streamed `Message` chunks, `MessageUsage`, `Finish`."""
    return Turn().text(*chunks(events - 2)).usage(input_tokens=120, output_tokens=events)


def sized_fake(events: int) -> FakeGoose:
    size = events + QUEUE_MARGIN
    turn = answer_turn(events)
    return FakeGoose(
        replay_buffer_size=size, subscriber_queue_size=size, default_turn=lambda _message: turn
    )


class Ends:
    """When each run's terminal event was committed, from the log's commit listener."""

    def __init__(self, log: EventLog, loop: asyncio.AbstractEventLoop) -> None:
        self.times: dict[str, float] = {}
        self._loop = loop
        self._changed = asyncio.Event()
        self.remove = log.add_commit_listener(self._committed)

    def _committed(self, token: int, events: list[Event]) -> None:
        for event in events:
            if event.is_terminal and event.run_id is not None:
                self.times[event.run_id] = time.perf_counter()
                self._loop.call_soon_threadsafe(self._changed.set)

    async def wait(self, run_id: str) -> float:
        async with asyncio.timeout(RUN_TIMEOUT):
            while True:
                self._changed.clear()  # before looking: a commit after the look sets it again
                if run_id in self.times:
                    return self.times[run_id]
                await self._changed.wait()


def as_dicts(events: list[Event]) -> list[dict[str, Any]]:
    """Events as `append_many` takes them, their data decoded before any timing."""
    return [
        {
            "stream": e.stream,
            "type": e.type,
            "data": e.data,
            "run_id": e.run_id,
            "upstream_event_id": e.upstream_event_id,
        }
        for e in events
    ]


def check_run(events: list[Event], goose_events: int) -> None:
    """The pump stored every goose event once and the run finished: else the figures lie."""
    from_goose = [e for e in events if e.upstream_event_id is not None]
    types = {e.type for e in events}
    last = events[-1]
    if len(from_goose) != goose_events or last.type != FINISH or "UpdateConversation" in types:
        raise RuntimeError(
            f"the run stored {len(from_goose)} of {goose_events} goose events, types "
            f"{sorted(types)}, ending with {last.type} {last.data.get('status')!r}"
        )
    if last.data.get("status") != "finished":
        raise RuntimeError(f"the run ended {last.data.get('status')!r}")


# --- gateway_kit's side ---------------------------------------------------------------------


async def pump_side(
    path: Path, runs: int, events: int, guards: int
) -> tuple[float, float, list[list[dict[str, Any]]]]:
    """`runs` runs one after another; their seconds, process CPU seconds, and stored events."""
    log = EventLog(f"sqlite:///{path}")
    fake = sized_fake(events)
    client = fake.client()
    upstream = GooseUpstream(DEFAULT_BASE_URL, secret_key=fake.secret_key, client=client)
    gateway = Gateway(
        allow_anonymous=True,
        log=log,
        upstream=upstream,
        plugins=[NoopGuard(i) for i in range(guards)],
        load_entry_points=False,  # exactly the built-ins and the guards
    )
    assert gateway.runs is not None and gateway.pumps is not None
    assert gateway.lifecycle is not None
    ends = Ends(log, asyncio.get_running_loop())
    await gateway.runs.startup()
    seconds = cpu = 0.0
    stored: list[list[dict[str, Any]]] = []
    try:
        pump = gateway.pumps.ensure
        gateway.pumps.ensure = lambda session_id: None  # type: ignore[method-assign]
        for _ in range(runs):
            run = await gateway.runs.start(STREAM, MESSAGE)
            await fake.wait_idle()  # goose has played the whole turn into its buffer
            gc.collect()  # what the untimed part left is collected before the clock starts
            cpu_start, start = time.process_time(), time.perf_counter()
            pump(run.session_id)
            ended = await ends.wait(run.run_id)
            seconds += ended - start
            cpu += time.process_time() - cpu_start
            await gateway.pumps.wait_idle()  # the pump's last look at the session, untimed
            await gateway.lifecycle.billing.wait_idle()
            run_events = await log.aread(0, None, events + 100, run_id=run.run_id)
            check_run(run_events, events)
            stored.append(as_dicts(run_events))
    finally:
        ends.remove()
        await gateway.runs.shutdown()
        await client.aclose()
        log.close()
    return seconds, cpu, stored


# --- the baselines --------------------------------------------------------------------------


def many_side(path: Path, runs: list[list[dict[str, Any]]]) -> float:
    log = EventLog(f"sqlite:///{path}")
    try:
        gc.collect()
        start = time.perf_counter()
        for events in runs:
            log.append_many(events)
        return time.perf_counter() - start
    finally:
        log.close()


def append_side(path: Path, runs: list[list[dict[str, Any]]]) -> float:
    log = EventLog(f"sqlite:///{path}")
    try:
        gc.collect()
        start = time.perf_counter()
        for events in runs:
            for event in events:
                log.append(**event)
        return time.perf_counter() - start
    finally:
        log.close()


async def aappend_side(path: Path, runs: list[list[dict[str, Any]]]) -> float:
    log = EventLog(f"sqlite:///{path}")
    try:
        gc.collect()
        start = time.perf_counter()
        for events in runs:
            for event in events:
                await log.aappend(**event)
        return time.perf_counter() - start
    finally:
        log.close()


async def goose_alone(runs: int, events: int) -> float:
    """The fake goose streaming each run's turn to a reader that appends nothing."""
    fake = sized_fake(events)
    client = fake.client()
    upstream = GooseUpstream(DEFAULT_BASE_URL, secret_key=fake.secret_key, client=client)
    seconds = 0.0
    try:
        for _ in range(runs):
            session_id = fake.create_session()
            request_id = await upstream.reply(session_id, MESSAGE, str(uuid.uuid4()))
            await fake.wait_idle()
            gc.collect()
            start = time.perf_counter()
            seen = 0
            async with upstream.events(session_id, None) as frames:
                async for frame in frames:
                    seen += frame.chat_request_id == request_id
                    if frame.type == "Finish":
                        break
            seconds += time.perf_counter() - start
            if seen != events:
                raise RuntimeError(f"goose alone: read {seen} of {events} events")
    finally:
        await client.aclose()
    return seconds


# --- driver ---------------------------------------------------------------------------------


class Round:
    """One round's sides, each returning seconds for all its runs."""

    def __init__(self, work: Path, args: argparse.Namespace, events: list[list[dict[str, Any]]]):
        self.work = work
        self.args = args
        self.events = events
        self.seconds: dict[str, float] = {}
        self.pump_cpu = 0.0

    def file(self, label: str) -> Path:
        return self.work / f"{label}-{uuid.uuid4().hex[:8]}.db"

    def run(self, side: str) -> None:
        args = self.args
        if side == "pump":
            seconds, self.pump_cpu, _ = asyncio.run(
                pump_side(self.file("pump"), args.runs, args.events, args.guards)
            )
        elif side == "many":
            seconds = many_side(self.file("many"), self.events)
        elif side == "append":
            seconds = append_side(self.file("append"), self.events)
        elif side == "aappend":
            seconds = asyncio.run(aappend_side(self.file("aappend"), self.events))
        else:
            seconds = asyncio.run(goose_alone(args.runs, args.events))
        self.seconds[side] = seconds


SIDES = ("pump", "many", "append", "aappend", "goose")


def stored_bytes(runs: list[list[dict[str, Any]]]) -> float:
    sizes = [len(encode(e["data"])) for events in runs for e in events]
    return statistics.mean(sizes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds (default 9)")
    parser.add_argument("--runs", type=int, default=3, help="runs per round and side (default 3)")
    parser.add_argument(
        "--events", type=int, default=2000, help="goose events per run (default 2000)"
    )
    parser.add_argument("--guards", type=int, default=5, help="no-op finish guards (default 5)")
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    args = parser.parse_args()
    if args.events < 3:
        parser.error("--events must be at least 3 (a chunk, the usage, the Finish)")

    goose_events = args.runs * args.events
    many = Case(f"vs append_many, 1 call per run ({args.events:,} events)", 0.80)
    single = Case("vs append, 1 event per call, 1 thread", None)
    awaited = Case("vs aappend, 1 event per call, event loop", None)
    alone = Case("vs goose's stream alone, nothing appended", None)
    cpu_per_event: list[float] = []

    print(
        f"{args.runs} runs x {args.events:,} goose events per side and round, "
        f"{args.guards} no-op finish guards, {args.rounds} rounds"
    )
    print(f"At the start: {machine_load()}")
    with tempfile.TemporaryDirectory(prefix="gk-bench-", dir=args.dir) as tmp:
        work = Path(tmp)
        # A run of the pump, untimed, gives the baselines their events (every round's runs
        # store the same events but for their ids) and warms imports and caches.
        _, _, events = asyncio.run(
            pump_side(work / "warmup.db", args.runs, args.events, args.guards)
        )
        size = stored_bytes(events)
        print(f"{sum(len(e) for e in events) // args.runs:,} events stored per run, "
              f"{size:.0f} bytes of JSON data each on average")  # fmt: skip
        for rnd in range(args.rounds):
            order = SIDES if rnd % 2 == 0 else tuple(reversed(SIDES))
            this = Round(work, args, events)
            for side in order:
                this.run(side)
            rates = {side: rate(goose_events, s) for side, s in this.seconds.items()}
            many.add(rates["pump"], rates["many"])
            single.add(rates["pump"], rates["append"])
            awaited.add(rates["pump"], rates["aappend"])
            alone.add(rates["pump"], rates["goose"])
            cpu_per_event.append(this.pump_cpu / goose_events * 1e6)
            line = ", ".join(f"{side} {rates[side]:,.0f}" for side in SIDES)
            print(f"  round {rnd + 1}/{args.rounds}: events/s {line}", flush=True)

    many.notes.append(
        "timed: starting the pump to the commit of the run's Finish, goose's turn buffered"
    )
    ceiling = statistics.median(g / m for g, m in zip(alone.theirs, many.theirs, strict=True))
    many.notes.append(
        f"ceiling: goose's stream alone, appending nothing, reaches {ceiling:.2f} of append_many"
    )
    many.notes.append(
        f"pump: {statistics.median(cpu_per_event):.0f} us of process CPU per goose event "
        f"({min(cpu_per_event):.0f}-{max(cpu_per_event):.0f})"
    )
    print_table(
        "Pump throughput: gateway_kit's pump vs the log alone (SQLite, WAL, synchronous=FULL)",
        [many, single, awaited, alone],
        "pump",
        "baseline",
        unit="goose events/s",
    )
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
