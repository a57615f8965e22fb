"""Socket.IO delivery: 500 clients over 50 streams, gateway_kit against bare python-socketio.

- bare: a python-socketio server alone (ASGI, uvicorn), a room per stream; its
  ``POST /bench/append`` emits the event to the stream's room from memory;
- durable (the physical baseline): the same server, committing each event to raw sqlite3
  (WAL, synchronous=FULL, one transaction, on the event loop) before it emits it: what
  delivering only durable events costs on this machine's disk, with nothing else added;
- gateway_kit: `Gateway`'s Socket.IO endpoint over an `EventLog` (SQLite, WAL,
  synchronous=FULL): each client trades a one-time ticket at connect and subscribes to its
  stream; ``POST /bench/append`` appends durably, and the gateway delivers from the log.

Each server runs alone in its own uvicorn process; the clients (python-socketio's
`AsyncClient` over websocket, client k on stream k mod 50) run in two client processes. This
process appends through the server's own HTTP route at a steady rate, round-robin over the
streams, each event carrying the time its append was sent: latency is arrival minus send time,
over every (client, event) pair after a warm-up. Memory per idle connection: what the server's
resident memory grows by while the second client process connects its half of the clients
(each subscribed), over that half: what one more connection costs, the server's fixed costs
(threads, database connections and their caches) left out on both sides. Each round runs
all three, in rotating order; the ratios are medians of per-round ratios.

    .venv/bin/python bench/socketio_delivery.py          # about 5 minutes on 2 cores
    .venv/bin/python bench/socketio_delivery.py --rounds 5 --clients 500 --streams 50
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass
from typing import Any

from _common import print_table
from _harness import (
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
    settled_rss,
)
from streams_latency import append_steadily

KINDS = ("socketio-bare", "socketio-durable", "gateway")
LABELS = {
    "socketio-bare": "python-socketio",
    "socketio-durable": "durable baseline",
    "gateway": "gateway_kit",
}
WARMUP = 2  # events per stream not counted
DRAIN_SECONDS = 20.0


@dataclass
class Outcome:
    latencies: list[float]
    append_ms: list[float]  # round trip of each append request
    missing: int
    duplicates: int
    kib_per_connection: float

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 99)

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 50)


def measure(work: Workdir, kind: str, args: argparse.Namespace) -> Outcome:
    per_stream = WARMUP + args.events
    job: dict[str, Any] = {
        "mode": "sockets",
        "streams": args.streams,
        "expect": per_stream,
        "warmup": WARMUP,
        "tickets": kind == "gateway",
        "timeout": args.streams * per_stream / args.rate + DRAIN_SECONDS,
    }
    with Server(work, kind, db=kind != "socketio-bare") as server:
        job["base"] = server.url
        half = args.clients // 2
        clients = [Clients({**job, "first": 0, "count": half})]
        try:
            clients[0].wait_ready(120)
            before = settled_rss(server)  # what the first half's connects set going

            clients.append(Clients({**job, "first": half, "count": args.clients - half}))
            clients[1].wait_ready(120)
            connected = settled_rss(server)
            url = f"{server.url}/bench/append"
            streams = [f"s{k}" for k in range(args.streams)]
            events = args.streams * per_stream
            round_trips = asyncio.run(append_steadily(url, events, args.rate, streams))
            results = [client.result(job["timeout"] + 30) for client in clients]
        finally:
            for client in clients:
                client.kill()
    latencies = [ms for r in results for ms in r["latencies"]]
    delivered = sum(sum(r["counts"]) for r in results)
    return Outcome(
        latencies=latencies,
        append_ms=round_trips,
        missing=args.clients * per_stream - delivered,
        duplicates=sum(r["duplicates"] for r in results),
        kib_per_connection=(connected - before) / (args.clients - half),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--clients", type=int, default=500, help="default 500")
    parser.add_argument("--streams", type=int, default=50, help="default 50")
    parser.add_argument("--events", type=int, default=10, help="counted events per stream (10)")
    parser.add_argument("--rate", type=float, default=25.0, help="appends per second (25)")
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    add_server_options(parser)
    args = parser.parse_args()
    apply_server_options(args)
    raise_open_files()

    p99 = LowerIsBetter("delivery p99: gateway_kit vs python-socketio (x lower)", 1 / 1.2)
    memory = LowerIsBetter("memory per idle connection (x lower)", 1 / 1.2)
    p50 = LowerIsBetter("delivery p50 (x lower)", None)
    # Against the physical baseline: what gateway_kit adds to a durable commit, and what the
    # durable commit alone adds to emitting from memory.
    over_durable = LowerIsBetter("delivery p99: gateway_kit vs durable baseline", None)
    durable_p99 = LowerIsBetter("delivery p99: durable baseline vs python-socketio", None)
    print(
        f"{server_stack()}; {args.clients} clients over {args.streams} streams in 2 processes; "
        f"{args.rate:g} appends/s, {WARMUP}+{args.events} per stream; {args.rounds} rounds"
    )
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    complete = True
    try:
        for rnd in range(args.rounds):
            order = KINDS[rnd % len(KINDS) :] + KINDS[: rnd % len(KINDS)]
            outcomes = {kind: measure(work, kind, args) for kind in order}
            ours, bare = outcomes["gateway"], outcomes["socketio-bare"]
            durable = outcomes["socketio-durable"]
            p99.add(ours.p99, bare.p99)
            over_durable.add(ours.p99, durable.p99)
            durable_p99.add(durable.p99, bare.p99)
            p50.add(ours.p50, bare.p50)
            memory.add(ours.kib_per_connection, bare.kib_per_connection)
            complete = complete and not any(o.missing or o.duplicates for o in outcomes.values())
            print(f"  round {rnd + 1}/{args.rounds}:")
            for k, o in outcomes.items():
                print(
                    f"    {LABELS[k]:<17} p50/p99 {o.p50:.1f}/{o.p99:.1f} ms (append "
                    f"{percentile(o.append_ms, 50):.1f}/{percentile(o.append_ms, 99):.1f}), "
                    f"{o.kib_per_connection:.0f} KiB/conn "
                    f"(missing {o.missing}, dup {o.duplicates})",
                    flush=True,
                )
    finally:
        work.cleanup()
    p99.notes.append("goal: gateway_kit's p99 at most 1.2x python-socketio's (ratio >= 0.83)")
    memory.notes.append("goal: at most 1.2x python-socketio's memory per idle connection")
    print_table(
        "Goals (ratio = python-socketio's / gateway_kit's; delivery "
        + ("complete" if complete else "INCOMPLETE")
        + ")",
        [p99, memory, p50],
        "gateway_kit",
        "python-socketio",
    )
    print_table(
        "The physical baseline: gateway_kit against it",
        [over_durable],
        "gateway_kit",
        "durable baseline",
    )
    print_table(
        "The physical baseline against python-socketio",
        [durable_p99],
        "durable baseline",
        "python-socketio",
    )
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
