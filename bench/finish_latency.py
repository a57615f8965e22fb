"""Finish latency: from goose's `Finish` to a client receiving the run's own `Finish`, against
the same time for a goose `Message`, with five no-op finish guards, over real HTTP; and the
same Finish latency with the built-in `publish_guard` checking a delivery against no guard.

The `Gateway` (an `EventLog` on a SQLite file, five plugins with a no-op `finish_guard`, the
fake goose in process behind its `GooseUpstream`) is served by uvicorn in a thread of this
process; one client process follows ``GET /gateway/streams/{stream}/events`` with httpx-sse.
This process starts runs with ``POST /gateway/streams/{stream}/runs``, one at a time.

- Start: `SessionBus.publish` of the fake goose, wrapped here, notes ``time.perf_counter()``
  as goose publishes each event (before its subscribers are pushed to).
- End: the client notes ``time.perf_counter()`` once it has parsed the event's envelope (on
  Linux CLOCK_MONOTONIC: one clock for every process of the machine).
- A goose `Message` is matched to the log's `Message` by goose's id (`upstream_event_id`);
  goose's `Finish` to the run's terminal `Finish` through the run's `UpstreamFinish` (goose's
  Finish as stored, also reported, with the same id).

Every goose event of a turn comes `--gap` ms after the one before, so each one is appended,
delivered and (for `Finish`) decided alone, never batched with another. A log commit
listener also notes when each event was committed, which splits each latency into the part
before the commit (pump, lifecycle) and the delivery after it. Each round is a fresh log,
server and client; the first runs of each round warm up and are not counted.

*publish* part: every run's answer links 50 pages (`/MindSpace/bench/public/p<i>.html`), each
referencing 10 SVGs, all on disk (500 assets): `publish_guard` reads the answer, stats and
parses every page and stats every asset, and passes. Each round measures a gateway with no
guard and one with `publish_guard`, the same turns, in alternating order; the ratio of their
`Finish` p50s is taken per round.

    .venv/bin/python bench/finish_latency.py             # about 3.5 minutes on 2 cores
    .venv/bin/python bench/finish_latency.py --rounds 7 --runs 80 --gap 40 --parts noop
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from _common import NoopGuard
from _harness import Clients, machine_load, percentile, serve_in_thread
from gateway_kit_plugins.publish_guard import PublishGuard
from gateway_kit_plugins.publish_guard.checking import KnownPages

from gateway_kit import Event, EventLog, Gateway, GooseUpstream, PluginContext, StreamOwners
from gateway_kit.gateway import ANONYMOUS_WARNING
from gateway_kit.log.event import FINISH
from gateway_kit.runs.events import UPSTREAM_FINISH
from gateway_kit.testing import DEFAULT_BASE_URL, FakeGoose, Turn
from gateway_kit.testing.bus import BusEvent, SessionBus
from gateway_kit.testing.turns import SendMessage
from gateway_kit.types import JSONObject

STREAM = "conv-1"
MESSAGE = "Tell me about foxes."
CHUNK = "The quick brown fox "
GOAL_MS = 2.0  # Finish's p50 may exceed Message's by this much
PUBLISH_GOAL = 2.0  # Finish's p50 with publish_guard on, at most this times with no guard
PAGES = 50
ASSETS_PER_PAGE = 10
OWNER = "bench"
RUN_TIMEOUT = 30.0
FIRST_DELAY = 0.08  # s from the reply to goose's first event: the pump has connected by then
SETTLE = 0.05  # s after a run's end before the next starts: the pump and the bill are done


# --- what the server side notes ---------------------------------------------------------------

published: dict[int, float] = {}  # goose id -> when the fake published it (this round's bus)
_publish = SessionBus.publish


def noting_publish(self: SessionBus, request_id: str | None, event: JSONObject) -> BusEvent | None:
    now = time.perf_counter()
    stored = _publish(self, request_id, event)
    if stored is not None:
        published[stored.id] = now
    return stored


SessionBus.publish = noting_publish  # type: ignore[method-assign]


class Commits:
    """When each event was committed, and when each run's terminal event was."""

    def __init__(self) -> None:
        self.at: dict[int, float] = {}  # seq -> time
        self.ended: dict[str, float] = {}  # run_id -> time
        self._changed = threading.Condition()

    def listener(self, token: int, events: list[Event]) -> None:
        now = time.perf_counter()
        for event in events:
            self.at[event.seq] = now
            if event.is_terminal and event.run_id is not None:
                with self._changed:
                    self.ended[event.run_id] = now
                    self._changed.notify_all()

    def wait_end(self, run_id: str) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: run_id in self.ended, RUN_TIMEOUT):
                raise RuntimeError(f"run {run_id} did not end within {RUN_TIMEOUT:g} s")


def paced_turn(messages: int, gap: float) -> Turn:
    """`messages` streamed chunks, then `MessageUsage`, then `Finish`, `gap` s apart."""
    turn = Turn().delay(FIRST_DELAY)
    message_id = f"msg_bench_{messages}"
    for i in range(messages):
        if i:
            turn = turn.delay(gap)
        turn = turn.text(CHUNK, message_id=message_id)
    return turn.delay(gap).usage(input_tokens=120, output_tokens=messages).delay(gap)


# --- one round --------------------------------------------------------------------------------


@dataclass
class Latencies:
    """Milliseconds, one list per kind of event: publish to client, and publish to commit."""

    total: dict[str, list[float]] = field(default_factory=dict)
    to_commit: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, total: float, to_commit: float) -> None:
        self.total.setdefault(kind, []).append(total * 1000)
        self.to_commit.setdefault(kind, []).append(to_commit * 1000)


KINDS = ("Message", UPSTREAM_FINISH, FINISH)
FIRST = "first Message"  # also counted under Message: the pump looks its run up first
ROWS = ("Message", FIRST, UPSTREAM_FINISH, FINISH)


@dataclass
class Side:
    """What a measured gateway has: its plugins and their settings, and the turn goose plays."""

    name: str
    plugins: list[object]
    config: dict[str, dict[str, Any]]
    turn: Turn


def noop_side(args: argparse.Namespace) -> Side:
    turn = paced_turn(args.messages, args.gap / 1000)
    return Side("noop", [NoopGuard(i) for i in range(args.guards)], {}, turn)


def measure(work: Path, args: argparse.Namespace, number: int, side: Side) -> Latencies:
    published.clear()
    log = EventLog(f"sqlite:///{work / f'round-{number}-{side.name}.db'}")
    StreamOwners(log).declare(STREAM, OWNER)
    commits = Commits()
    remove = log.add_commit_listener(commits.listener)
    fake = FakeGoose(default_turn=lambda _message: side.turn)
    client = fake.client()
    gateway = Gateway(
        log=log,
        upstream=GooseUpstream(DEFAULT_BASE_URL, secret_key=fake.secret_key, client=client),
        plugins=side.plugins,
        plugin_config=side.config,
        load_entry_points=False,  # exactly the built-ins and the guards
        allow_anonymous=True,
    )
    runs = args.warmup + args.runs
    run_ids: list[str] = []
    try:
        with serve_in_thread(gateway, args.stack) as url:
            reader = Clients(
                {
                    "mode": "envelopes",
                    "url": f"{url}/gateway/streams/{STREAM}/events",
                    "expect": runs,
                    "timeout": runs * RUN_TIMEOUT,
                }
            )
            try:
                reader.wait_ready()
                with httpx.Client(base_url=url, timeout=RUN_TIMEOUT) as http:
                    for _ in range(runs):
                        answer = http.post(
                            f"/gateway/streams/{STREAM}/runs", json={"message": MESSAGE}
                        )
                        answer.raise_for_status()
                        run_ids.append(answer.json()["run_id"])
                        commits.wait_end(run_ids[-1])
                        time.sleep(SETTLE)
                result = reader.result(timeout=RUN_TIMEOUT)
            finally:
                reader.kill()
    finally:
        remove()
        log.close()
    return match(result["events"], commits, set(run_ids[args.warmup :]))


def match(seen: list[list[Any]], commits: Commits, counted: set[str]) -> Latencies:
    """Pair what the client saw with what goose published and when the log committed it."""
    out = Latencies()
    goose_finish: dict[str, int] = {}  # run_id -> the goose id of its goose Finish
    first_seen: set[str] = set()  # runs whose first Message has been seen
    for at, seq, kind, run_id, upstream_id in seen:
        if run_id not in counted or kind not in KINDS:
            continue
        if kind == UPSTREAM_FINISH:
            goose_finish[run_id] = int(upstream_id)
        goose_id = int(upstream_id) if upstream_id is not None else goose_finish.get(run_id)
        if goose_id is None or goose_id not in published:
            raise RuntimeError(f"no goose event for {kind} {seq} of run {run_id}")
        start = published[goose_id]
        out.add(kind, at - start, commits.at[seq] - start)
        if kind == "Message" and run_id not in first_seen:
            first_seen.add(run_id)
            out.add(FIRST, at - start, commits.at[seq] - start)
    missing = [kind for kind in KINDS if kind not in out.total]
    if missing or len(out.total[FINISH]) != len(counted):
        raise RuntimeError(f"the client did not see every run end (missing {missing})")
    return out


# --- the publish part ---------------------------------------------------------------------------


def publish_tree(work: Path) -> str:
    """50 pages of 10 SVGs each under a public root of `OWNER`; the root's template."""
    root = work / "ms" / OWNER / "public"
    (root / "assets").mkdir(parents=True, exist_ok=True)
    svg = "<svg xmlns='http://www.w3.org/2000/svg' width='8' height='8'><rect/></svg>"
    for i in range(PAGES):
        images = []
        for j in range(ASSETS_PER_PAGE):
            (root / "assets" / f"p{i}-{j}.svg").write_text(svg)
            images.append(f'<figure><img src="assets/p{i}-{j}.svg" alt="figure {j}"></figure>')
        body = f"<h1>Page {i}</h1><p>{CHUNK * 20}</p>{''.join(images)}"
        (root / f"p{i}.html").write_text(f"<!doctype html><html><body>{body}</body></html>")
    return f"{work}/ms/{{user_id}}/public"


def publishing_turn(gap: float) -> Turn:
    """The answer of a run that published 50 pages, streamed in 11 chunks, `gap` s apart."""
    links = [f"- [page {i}](/MindSpace/{OWNER}/public/p{i}.html)\n" for i in range(PAGES)]
    chunks = ["页面已生成, the pages are published:\n"] + [
        "".join(links[i : i + PAGES // 9]) for i in range(0, PAGES, PAGES // 9)
    ]
    turn = Turn().delay(FIRST_DELAY)
    for i, chunk in enumerate(chunks):
        turn = (turn.delay(gap) if i else turn).text(chunk, message_id="msg_bench_pages")
    return turn.delay(gap).usage(input_tokens=120, output_tokens=len(chunks)).delay(gap)


def publish_sides(args: argparse.Namespace, template: str) -> list[Side]:
    turn = publishing_turn(args.gap / 1000)
    config = {"publish_guard": {"public_root": template}}
    return [Side("none", [], {}, turn), Side("publish_guard", [], config, turn)]


def check_alone(work: Path, template: str, times: int = 20) -> tuple[float, float]:
    """ms of one `publish_guard` check of the turn's events, called directly (median of
    `times`): pages seen for the first time, and pages unchanged since an earlier check."""
    log = EventLog(f"sqlite:///{work / 'alone.db'}")
    try:
        StreamOwners(log).declare(STREAM, OWNER)
        for step in publishing_turn(0).steps:
            if isinstance(step, SendMessage):
                data = {"type": "Message", "message": {**step.message, "created": 0}}
                log.append(STREAM, "Message", data, run_id="alone")
        log.append(STREAM, UPSTREAM_FINISH, {"type": "Finish"}, run_id="alone")
        events = log.read(run_id="alone")
        run = argparse.Namespace(run_id="alone", stream=STREAM)
        guard = PublishGuard()
        guard.configure_plugin({"public_root": template}, PluginContext(log=log))
        first, known = [], []
        for _ in range(times):
            guard.known = KnownPages()
            started = time.perf_counter()
            assert guard.finish_guard(run, events) is None
            first.append((time.perf_counter() - started) * 1000)
            started = time.perf_counter()
            guard.finish_guard(run, events)
            known.append((time.perf_counter() - started) * 1000)
        return statistics.median(first), statistics.median(known)
    finally:
        log.close()


def publish_part(args: argparse.Namespace, work: Path) -> None:
    template = publish_tree(work)
    first, known = check_alone(work, template)
    print(
        f"  the check alone, in process: {first:.2f} ms for pages seen the first time, "
        f"{known:.2f} ms for pages unchanged since an earlier check",
        flush=True,
    )
    sides = publish_sides(args, template)
    finish: dict[str, list[float]] = {side.name: [] for side in sides}
    decided: dict[str, list[float]] = {side.name: [] for side in sides}
    ratios: list[float] = []
    for number in range(args.rounds):
        for side in sides if number % 2 == 0 else sides[::-1]:
            got = measure(work, args, number, side)
            finish[side.name].append(percentile(got.total[FINISH], 50))
            decided[side.name].append(
                percentile(got.to_commit[FINISH], 50)
                - percentile(got.to_commit[UPSTREAM_FINISH], 50)
            )
        ratios.append(finish["publish_guard"][-1] / finish["none"][-1])
        print(
            f"  round {number + 1}/{args.rounds}: Finish p50 ms, no guard "
            f"{finish['none'][-1]:.2f}, publish_guard {finish['publish_guard'][-1]:.2f}; "
            f"ratio {ratios[-1]:.2f}",
            flush=True,
        )
    print(f"\n{PAGES} pages, {PAGES * ASSETS_PER_PAGE} assets, all present; medians of rounds")
    for side in sides:
        print(
            f"  {side.name:<14} goose Finish -> the run's Finish p50 ms {spread(finish[side.name])}"
            f"; the lifecycle {spread(decided[side.name])}"
        )
    ratio = statistics.median(ratios)
    verdict = "PASS" if ratio <= PUBLISH_GOAL else "MISS"
    print(
        f"Goal: with publish_guard <= {PUBLISH_GOAL:g}x no guard: {ratio:.2f}x "
        f"({min(ratios):.2f}-{max(ratios):.2f} over rounds)  {verdict}"
    )


# --- driver -----------------------------------------------------------------------------------


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"


def noop_part(args: argparse.Namespace, work: Path) -> None:
    print(
        f"uvicorn {uvicorn.__version__} ({args.stack} stack) in a thread, one SSE client "
        f"process; {args.guards} no-op finish guards; {args.runs} runs per round after "
        f"{args.warmup} warm-up, {args.messages} Messages each, {args.gap:g} ms apart; "
        f"{args.rounds} rounds"
    )
    rounds: list[Latencies] = []
    differences: list[float] = []
    side = noop_side(args)
    for number in range(args.rounds):
        got = measure(work, args, number, side)
        rounds.append(got)
        p50 = {kind: percentile(got.total[kind], 50) for kind in KINDS}
        differences.append(p50[FINISH] - p50["Message"])
        print(
            f"  round {number + 1}/{args.rounds}: p50 ms Message {p50['Message']:.2f}, "
            f"UpstreamFinish {p50[UPSTREAM_FINISH]:.2f}, Finish {p50[FINISH]:.2f}; "
            f"Finish - Message {differences[-1]:.2f}",
            flush=True,
        )

    header = (
        f"{'goose event -> client gets':<34} {'count':>6} {'p50 ms':>16} {'p90 ms':>16} "
        f"{'p99 ms':>16} {'p50 to commit':>16}"
    )
    print(f"\nLatency from goose's publish, medians of {args.rounds} rounds (min-max)")
    print(header)
    print("-" * len(header))
    labels = {
        "Message": "Message -> Message",
        FIRST: "  of which the first of each run",
        UPSTREAM_FINISH: "Finish -> UpstreamFinish (goose's)",
        FINISH: "Finish -> the run's Finish",
    }
    for kind in ROWS:
        cells = [spread([percentile(r.total[kind], pct) for r in rounds]) for pct in (50, 90, 99)]
        commit = spread([percentile(r.to_commit[kind], 50) for r in rounds])
        count = sum(len(r.total[kind]) for r in rounds)
        print(f"{labels[kind]:<34} {count:>6} {cells[0]:>16} {cells[1]:>16} {cells[2]:>16} "
              f"{commit:>16}")  # fmt: skip
    print("(to commit: from goose's publish to the log's commit of the event, in the server)")
    decided = [
        percentile(r.to_commit[FINISH], 50) - percentile(r.to_commit[UPSTREAM_FINISH], 50)
        for r in rounds
    ]
    print(f"the lifecycle, UpstreamFinish committed -> Finish committed, p50: {spread(decided)} ms")

    difference = statistics.median(differences)
    verdict = "PASS" if difference <= GOAL_MS else "MISS"
    print(
        f"\nGoal: Finish p50 - Message p50 <= {GOAL_MS:g} ms: {difference:.2f} ms "
        f"({min(differences):.2f}-{max(differences):.2f} over rounds)  {verdict}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--runs", type=int, default=50, help="counted runs per round (50)")
    parser.add_argument("--warmup", type=int, default=3, help="runs not counted, per round (3)")
    parser.add_argument("--messages", type=int, default=8, help="Message events per run (8)")
    parser.add_argument("--gap", type=float, default=25.0, help="ms between goose events (25)")
    parser.add_argument("--guards", type=int, default=5, help="no-op finish guards (default 5)")
    parser.add_argument(
        "--stack",
        choices=("standard", "plain"),
        default="standard",
        help="uvicorn with what uvicorn[standard] installs (httptools, uvloop), or plain "
        "(h11, asyncio loop) (default standard)",
    )
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    parser.add_argument(
        "--parts", default="noop,publish", help="which parts, comma-separated (noop,publish)"
    )
    parser.add_argument(
        "--publish-runs", type=int, default=20, help="counted runs per side and round (20)"
    )
    args = parser.parse_args()
    # Every round's Gateway says allow_anonymous=True on purpose: one warning is enough.
    logging.getLogger("gateway_kit.gateway").addFilter(
        lambda r: r.getMessage() != ANONYMOUS_WARNING
    )

    print(f"At the start: {machine_load()}")
    with tempfile.TemporaryDirectory(prefix="gk-bench-", dir=args.dir) as tmp:
        if "noop" in args.parts:
            noop_part(args, Path(tmp))
        if "publish" in args.parts:
            print(
                f"\npublish: {args.publish_runs} runs per round after {args.warmup} warm-up, "
                f"each answer streamed in 11 Messages {args.gap:g} ms apart"
            )
            publish_runs = argparse.Namespace(**{**vars(args), "runs": args.publish_runs})
            publish_part(publish_runs, Path(tmp))
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
