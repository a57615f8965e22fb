"""Delivery latency, append to client, with 100 subscribers of one stream: three servers.

- legacy: the demo Flask app keeping events in a per-task deque (under uvicorn through a2wsgi,
  10 threads); clients poll ``GET /api/tasks/<id>?from=`` and wait 250 ms after every answer;
- peer: Starlette + sse-starlette, events in a Python list, ``Last-Event-ID`` resume;
- gateway: gateway_kit's `Gateway` over an `EventLog` (SQLite, WAL, synchronous=FULL): every
  append is committed durably before any subscriber can see it.

Each server runs alone in its own uvicorn process; subscribers (httpx-sse, or httpx for the
legacy poll) run in two client processes; this process appends through the server's own HTTP
route at a steady rate, each event carrying the time its append was sent. Latency is arrival
minus send time, over every (subscriber, event) pair after a short warm-up. Each round runs all
three, in a rotating order; the ratios are medians of per-round ratios.

    .venv/bin/python bench/streams_latency.py          # about 2.5 minutes on 2 cores
    .venv/bin/python bench/streams_latency.py --rounds 5 --seconds 20 --rate 50
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from _common import STREAM, TYPE, payload, print_table
from _harness import (
    USER,
    Clients,
    LowerIsBetter,
    Server,
    Workdir,
    add_server_options,
    apply_server_options,
    machine_load,
    percentile,
    raise_open_files,
    server_stack,
)

COMPETITORS = ("legacy", "peer", "gateway")
LABELS = {"legacy": "legacy poll", "peer": "sse-starlette", "gateway": "gateway_kit"}
STREAM_PATHS = {"peer": f"/streams/{STREAM}/events", "gateway": f"/gateway/streams/{STREAM}/events"}
POLL_INTERVAL = 0.25
WARMUP_EVENTS = 10
DRAIN_SECONDS = 15.0  # how long subscribers may lag behind the last append


@dataclass
class Outcome:
    latencies: list[float]  # milliseconds
    append_ms: list[float]  # round trip of each append request
    missing: int  # (subscriber, event) pairs never delivered
    duplicates: int
    cpu_us: float  # server CPU time per delivery (one event to one subscriber)

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 50)

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 99)


@dataclass
class Summary:
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    max: list[float] = field(default_factory=list)
    append_p50: list[float] = field(default_factory=list)
    append_p99: list[float] = field(default_factory=list)
    cpu_us: list[float] = field(default_factory=list)
    missing: int = 0
    duplicates: int = 0

    def add(self, outcome: Outcome) -> None:
        self.p50.append(outcome.p50)
        self.p99.append(outcome.p99)
        self.max.append(max(outcome.latencies))
        self.append_p50.append(percentile(outcome.append_ms, 50))
        self.append_p99.append(percentile(outcome.append_ms, 99))
        self.cpu_us.append(outcome.cpu_us)
        self.missing += outcome.missing
        self.duplicates += outcome.duplicates


async def append_steadily(
    url: str, events: int, rate: float, streams: Sequence[str] = (STREAM,)
) -> list[float]:
    """POST `events` events to `url`, one every 1/`rate` s, without waiting for the answers,
    round-robin over `streams` (each stream's events numbered from 0); the round trip of each
    append, ms."""
    round_trips: list[float] = []

    async def post(client: httpx.AsyncClient, n: int) -> None:
        stream, i = streams[n % len(streams)], n // len(streams)
        sent = time.time()
        data = {**payload(i), "t": sent}
        response = await client.post(url, json={"stream": stream, "type": TYPE, "data": data})
        response.raise_for_status()
        round_trips.append((time.time() - sent) * 1000)

    async with httpx.AsyncClient(timeout=30) as client:
        start = time.perf_counter()
        tasks = []
        for n in range(events):
            delay = start + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(post(client, n)))
        await asyncio.gather(*tasks)
    return round_trips


def legacy_task(base: str) -> str:
    with httpx.Client(base_url=base, timeout=30) as client:
        client.post("/login", json={"username": USER, "password": USER}).raise_for_status()
        task_id: str = client.post("/bench/tasks").json()["task_id"]
        return task_id


def measure(work: Workdir, kind: str, args: argparse.Namespace) -> Outcome:
    events = WARMUP_EVENTS + int(args.seconds * args.rate)
    job: dict[str, Any] = {
        "expect": events,
        "warmup": WARMUP_EVENTS,
        "timeout": events / args.rate + DRAIN_SECONDS,
    }
    with Server(work, kind, db=kind == "gateway") as server:
        if kind == "legacy":
            task = legacy_task(server.url)
            append_url = f"{server.url}/bench/tasks/{task}/events"
            job |= {"mode": "poll", "base": server.url, "task": task, "interval": POLL_INTERVAL}
        else:
            append_url = f"{server.url}/bench/append"
            job |= {"mode": "sse", "url": server.url + STREAM_PATHS[kind]}
        shares = [args.subscribers // args.client_procs] * args.client_procs
        shares[0] += args.subscribers - sum(shares)
        clients = [Clients({**job, "count": share}) for share in shares]
        try:
            for client in clients:
                client.wait_ready()
            cpu_before = server.cpu_seconds()
            round_trips = asyncio.run(append_steadily(append_url, events, args.rate))
            results = [client.result(job["timeout"] + 30) for client in clients]
            cpu = server.cpu_seconds() - cpu_before
        finally:
            for client in clients:
                client.kill()
    latencies = [ms for r in results for ms in r["latencies"]]
    delivered = sum(sum(r["counts"]) for r in results)
    return Outcome(
        latencies=latencies,
        append_ms=round_trips,
        missing=args.subscribers * events - delivered,
        duplicates=sum(r["duplicates"] for r in results),
        cpu_us=cpu / (args.subscribers * events) * 1e6,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds (default 4)")
    parser.add_argument("--subscribers", type=int, default=100, help="default 100")
    parser.add_argument("--client-procs", type=int, default=2, help="client processes (2)")
    parser.add_argument("--rate", type=float, default=25.0, help="appends per second (25)")
    parser.add_argument("--seconds", type=float, default=8.0, help="of appends per run (8)")
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    add_server_options(parser)
    args = parser.parse_args()
    apply_server_options(args)
    raise_open_files()

    summaries = {kind: Summary() for kind in COMPETITORS}
    p99_vs_peer = LowerIsBetter("p99: gateway_kit vs sse-starlette (x lower)", 1.0)
    p50_vs_legacy = LowerIsBetter("p50: gateway_kit vs legacy poll (x lower)", 10.0)
    p50_vs_peer = LowerIsBetter("p50: gateway_kit vs sse-starlette (x lower)", None)
    p99_vs_legacy = LowerIsBetter("p99: gateway_kit vs legacy poll (x lower)", None)
    print(
        f"{server_stack()}; {args.subscribers} subscribers in {args.client_procs} processes; "
        f"{args.rate:g} appends/s for {args.seconds:g} s; {args.rounds} rounds"
    )
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    try:
        for rnd in range(args.rounds):
            order = COMPETITORS[rnd % 3 :] + COMPETITORS[: rnd % 3]
            outcomes = {kind: measure(work, kind, args) for kind in order}
            for kind, outcome in outcomes.items():
                summaries[kind].add(outcome)
            gk, peer, legacy = outcomes["gateway"], outcomes["peer"], outcomes["legacy"]
            p99_vs_peer.add(gk.p99, peer.p99)
            p50_vs_legacy.add(gk.p50, legacy.p50)
            p50_vs_peer.add(gk.p50, peer.p50)
            p99_vs_legacy.add(gk.p99, legacy.p99)
            line = ", ".join(f"{LABELS[k]} {o.p50:.1f}/{o.p99:.1f}" for k, o in outcomes.items())
            durable = percentile(gk.append_ms, 99)
            print(
                f"  round {rnd + 1}/{args.rounds}: p50/p99 ms {line}; "
                f"gateway_kit append p99 {durable:.1f}",
                flush=True,
            )
    finally:
        work.cleanup()

    header = (
        f"{'server':<16} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'append p50/p99':>15} "
        f"{'CPU us':>7}  delivery"
    )
    print(f"\nDelivery latency, medians of {args.rounds} rounds")
    print(header)
    print("-" * len(header))
    for kind, s in summaries.items():
        delivery = "complete" if not (s.missing or s.duplicates) else "INCOMPLETE"
        append = f"{statistics.median(s.append_p50):.1f}/{statistics.median(s.append_p99):.1f}"
        print(
            f"{LABELS[kind]:<16} {statistics.median(s.p50):>8.1f} {statistics.median(s.p99):>8.1f} "
            f"{statistics.median(s.max):>8.1f} {append:>15} {statistics.median(s.cpu_us):>7.1f}  "
            f"{delivery} (missing {s.missing}, duplicates {s.duplicates})"
        )
    print(
        "(append: round trip of the append request, ms; CPU us: server CPU time per event "
        "delivered to one subscriber, polls included)"
    )
    p99_vs_peer.notes.append("goal: gateway_kit p99 at or below sse-starlette's")
    p50_vs_legacy.notes.append("goal: gateway_kit p50 at least 10x below the legacy poll's")
    print_table(
        "Goals (ratio = their latency / gateway_kit's)",
        [p99_vs_peer, p50_vs_legacy, p50_vs_peer, p99_vs_legacy],
        "gateway_kit",
        "other",
        unit="ms",
    )

    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
