"""Server memory per idle SSE connection, 2 000 connections open: gateway_kit and sse-starlette.

Each server runs alone in its own uvicorn process. One client process opens the connections
(raw sockets: one SSE request each, read up to the end of the response head, then held open
and not read; the gateway's stream is empty, so each connection is a subscriber waiting for a
live event). The figure is (server RSS with every connection open - RSS before) / connections,
RSS read from /proc after it has settled. Before the "before" reading, a few connections are
opened and closed, so that start-up allocations (the gateway's live reader, thread pools,
first-request imports) are not charged to the connections. The open-files limit is raised with
`resource.setrlimit` for the servers and the client.

    .venv/bin/python bench/sse_memory.py               # about 1 minute
    .venv/bin/python bench/sse_memory.py --connections 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import INFO, MISS, PASS, STREAM, print_table
from _harness import (
    HOST,
    NOFILE,
    Clients,
    LowerIsBetter,
    Server,
    Workdir,
    machine_load,
    raise_open_files,
    server_stack,
)

PATHS = {"peer": f"/streams/{STREAM}/events", "gateway": f"/gateway/streams/{STREAM}/events"}
LABELS = {"peer": "sse-starlette", "gateway": "gateway_kit"}
GOAL_KIB = 50.0
WARMUP_CONNECTIONS = 20
PARALLEL_CONNECTS = 100  # connections being opened at once
SETTLE_SECONDS = 1.0  # RSS is read once two readings this far apart agree within 1%
SETTLE_LIMIT = 15.0


def settled_rss(server: Server) -> int:
    deadline = time.monotonic() + SETTLE_LIMIT
    last = server.rss_kib()
    while time.monotonic() < deadline:
        time.sleep(SETTLE_SECONDS)
        now = server.rss_kib()
        if abs(now - last) <= last / 100:
            return now
        last = now
    return last


def hold(server: Server, kind: str, count: int) -> Clients:
    job = {
        "mode": "idle",
        "host": HOST,
        "port": server.port,
        "path": PATHS[kind],
        "count": count,
        "parallel": PARALLEL_CONNECTS,
    }
    clients = Clients(job)
    opened = int(clients.wait_ready(timeout=120))
    if opened != count:
        clients.kill()
        raise RuntimeError(f"{kind}: {opened} of {count} connections opened")
    return clients


def measure(work: Workdir, kind: str, count: int) -> tuple[float, int]:
    """KiB per connection, and the sockets the server held at the time."""
    with Server(work, kind, db=kind == "gateway") as server:
        warmup = hold(server, kind, WARMUP_CONNECTIONS)
        warmup.tell("close")
        warmup.result()
        time.sleep(SETTLE_SECONDS)  # let the server see them go
        before = settled_rss(server)
        clients = hold(server, kind, count)
        try:
            after = settled_rss(server)
            sockets = server.open_sockets()
            clients.tell("close")
            clients.result()
        finally:
            clients.kill()
    return (after - before) / count, sockets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--connections", type=int, default=2000, help="default 2 000")
    parser.add_argument("--dir", default=None, help="where the database file goes (default: TMP)")
    args = parser.parse_args()
    raise_open_files(max(NOFILE, args.connections * 2 + 256))

    per_conn: dict[str, list[float]] = {"gateway": [], "peer": []}
    versus = LowerIsBetter("KiB per connection, x lower than sse-starlette", None)
    print(f"{server_stack()}; {args.connections:,} idle SSE connections; {args.rounds} rounds")
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    try:
        for rnd in range(args.rounds):
            order = ["gateway", "peer"] if rnd % 2 == 0 else ["peer", "gateway"]
            for kind in order:
                kib, sockets = measure(work, kind, args.connections)
                per_conn[kind].append(kib)
                print(
                    f"  round {rnd + 1}/{args.rounds}: {LABELS[kind]} {kib:.1f} KiB per "
                    f"connection ({sockets:,} sockets open in the server)",
                    flush=True,
                )
            versus.add(per_conn["gateway"][-1], per_conn["peer"][-1])
    finally:
        work.cleanup()

    header = f"{'server':<16} {'KiB/conn':>9} {'min-max':>13} {'goal':>8}  result"
    print(f"\nMemory per idle SSE connection, medians of {args.rounds} rounds")
    print(header)
    print("-" * len(header))
    for kind, values in per_conn.items():
        median = statistics.median(values)
        goal, result = "-", INFO
        if kind == "gateway":
            goal, result = f"<{GOAL_KIB:g}", PASS if median < GOAL_KIB else MISS
        print(
            f"{LABELS[kind]:<16} {median:>9.1f} {f'{min(values):.1f}-{max(values):.1f}':>13} "
            f"{goal:>8}  {result}"
        )
    print_table("Relative", [versus], "gateway_kit", "peer", unit="KiB per connection")

    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
