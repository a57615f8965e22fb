"""Server memory per SSE client, gateway_kit and sse-starlette: idle clients, and stuck ones.

Each server runs alone in its own uvicorn process. One client process opens the connections
(raw sockets: one SSE request each, read up to the end of the response head, then held open
and not read). RSS is read from /proc after it has settled. Before the "before" reading, a few
connections are opened and closed, so that start-up allocations (the gateway's live reader,
thread pools, first-request imports) are not charged to the connections. The open-files limit
is raised with `resource.setrlimit` for the servers and the client.

- idle (2 000 connections): the stream is empty, so each connection is a subscriber waiting for
  a live event. The figure is (server RSS with every connection open - RSS before) / connections.
- stuck (2 waves of 20 clients): what a client that stops reading still costs once the server
  has cut it off. The stream holds 50 000 events (about 15 MB of SSE), stored before the
  "before" reading; each client asks for them from the start and reads nothing past the
  response head (its client process takes up to 128 KiB off the socket), so the server's writes
  to it wait once the kernel's buffers and the transport's are full, and after the send timeout
  (30 s, both servers) each server cuts it off. (On loopback here the kernel holds up to about
  6 MB of one connection: the server's send buffer grows to 4 MB, the client's receive buffer to
  about 2 MB. A client whose unread data fits there is never seen stuck by either server: no
  write of theirs ever waits.) The script waits until the wave's connections are gone from the
  server's TCP sockets, or the server has logged an error for each (both do when they return
  with the response unfinished), with a deadline; then the next wave comes, the clients of the
  first still open at their end. Figures per client: server RSS after the first wave's cut-off
  (- RSS before), the highest RSS while it was stuck, the RSS the last wave added, and, from
  /proc/<pid>/net/tcp, the connections still held on the server's port and the bytes the
  kernel holds unsent for them (kernel memory, not in RSS). What a server frees stays largely
  in its RSS (the allocator keeps it for reuse), so the first wave shows about the peak even
  when nothing is held any more, or less than nothing when the allocator happens to give back
  memory it held at the "before" reading; the last wave, which reuses what the first freed,
  shows what is held. The ratio is of the last wave's RSS plus the kernel's unsent bytes.

    .venv/bin/python bench/sse_memory.py               # about 4 minutes
    .venv/bin/python bench/sse_memory.py --parts idle --connections 5000 --rounds 5
    .venv/bin/python bench/sse_memory.py --parts stuck --stuck-rounds 3 --stack plain
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from _apps import SEND_TIMEOUT
from _common import INFO, MISS, PASS, STREAM, print_table
from _harness import (
    HOST,
    NOFILE,
    SETTLE_LIMIT,
    SETTLE_SECONDS,
    Clients,
    LowerIsBetter,
    Server,
    Workdir,
    add_server_options,
    apply_server_options,
    machine_load,
    raise_open_files,
    server_stack,
    settled_rss,
)
from streams_replay import fill

PATHS = {"peer": f"/streams/{STREAM}/events", "gateway": f"/gateway/streams/{STREAM}/events"}
LABELS = {"peer": "sse-starlette", "gateway": "gateway_kit"}
GOAL_KIB = 50.0
WARMUP_CONNECTIONS = 20
PARALLEL_CONNECTS = 100  # connections being opened at once
STUCK_EVENTS = 50_000  # 15 MB: well past what the kernel holds of one connection (~6 MB)
# The gateway notices a stuck write within 1.25 send timeouts, counted from when the write
# began to wait: up to a minute after connecting while the servers fill every client's buffers.
CUT_OFF_LIMIT = SEND_TIMEOUT * 1.25 + 60.0
TCP_CLOSED = {"06", "07"}  # TIME_WAIT, CLOSE: a socket that holds nothing any more


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


@dataclass
class Stuck:
    """What waves of `count` stuck clients left in one server after it cut them off."""

    first: float  # KiB of server RSS per client, after the first wave was cut off
    peak: float  # KiB per client: the highest server RSS while the first wave was stuck
    more: float  # KiB per client the last wave added (the first, with one wave)
    held: int  # connections still held on the server's port, after the last wave
    clients: int  # stuck clients in all
    kernel: float  # KiB per client the kernel holds unsent for them, after the last wave
    seconds: float  # the longest wait for a wave to be cut off, from its last connect
    cut_off: bool  # every wave was seen cut off before CUT_OFF_LIMIT

    @property
    def cost(self) -> float:
        """KiB of RSS and kernel memory one more stuck client costs: the last wave's."""
        return self.more + self.kernel


def kernel_held(server: Server) -> tuple[int, int]:
    """Connections on the server's port that still hold something, and their unsent bytes.

    From /proc/<pid>/net/tcp, so this counts the sockets the server closed but the kernel
    still keeps with unsent data (FIN_WAIT1) too.
    """
    assert server.process is not None
    count = unsent = 0
    for line in Path(f"/proc/{server.process.pid}/net/tcp").read_text().splitlines()[1:]:
        _, local, remote, state, queues, *_ = line.split()
        if int(local.rpartition(":")[2], 16) != server.port or remote.endswith(":0000"):
            continue  # another port's socket, or the listening one
        if state not in TCP_CLOSED:
            count += 1
            unsent += int(queues.partition(":")[0], 16)
    return count, unsent


def errors_logged(server: Server) -> int:
    return sum(1 for line in server.log_text().splitlines() if line.startswith("ERROR:"))


def wait_cut_off(server: Server, count: int, held_before: int) -> tuple[float, bool, int]:
    """Until the server dropped the `count` connections opened last, or logged an error for
    each; seconds, whether before `CUT_OFF_LIMIT`, and the highest RSS seen meanwhile."""
    start = time.monotonic()
    errors_before = errors_logged(server)
    peak = server.rss_kib()
    while time.monotonic() - start < CUT_OFF_LIMIT:
        if kernel_held(server)[0] <= held_before or errors_logged(server) - errors_before >= count:
            return time.monotonic() - start, True, peak
        time.sleep(0.1)
        peak = max(peak, server.rss_kib())
    return time.monotonic() - start, False, peak


def wait_released(server: Server) -> None:
    """Until the server holds no client connection (the warm-up clients closed theirs)."""
    deadline = time.monotonic() + SETTLE_LIMIT
    while kernel_held(server)[0] and time.monotonic() < deadline:
        time.sleep(0.05)


def measure_stuck(work: Workdir, kind: str, count: int, events: int, waves: int) -> Stuck:
    """`waves` times `count` clients that stop reading, one wave after the other was cut off;
    every client keeps its end open until the end (a stuck client does not go away)."""
    with Server(work, kind, db=kind == "gateway") as server:
        fill(server.url, events)  # stored before the "before" reading: only clients are charged
        warmup = hold(server, kind, WARMUP_CONNECTIONS)  # the replay's first-request costs too
        warmup.tell("close")
        warmup.result()
        wait_released(server)
        readings = [settled_rss(server)]
        waits, peaks, all_cut_off = [], [], True
        opened: list[Clients] = []
        try:
            for _ in range(waves):
                held_before = kernel_held(server)[0]
                opened.append(hold(server, kind, count))
                seconds, cut_off, peak = wait_cut_off(server, count, held_before)
                waits.append(seconds)
                peaks.append(peak)
                all_cut_off = all_cut_off and cut_off
                readings.append(settled_rss(server))
            held, unsent = kernel_held(server)
            for clients in opened:
                clients.tell("close")
                clients.result()
        finally:
            for clients in opened:
                clients.kill()
    clients = count * waves
    return Stuck(
        first=(readings[1] - readings[0]) / count,
        peak=(peaks[0] - readings[0]) / count,
        more=(readings[-1] - readings[-2]) / count,
        held=held,
        clients=clients,
        kernel=unsent / 1024 / clients,
        seconds=max(waits),
        cut_off=all_cut_off,
    )


def run_idle(work: Workdir, rounds: int, connections: int) -> None:
    per_conn: dict[str, list[float]] = {"gateway": [], "peer": []}
    versus = LowerIsBetter("KiB per connection, x lower than sse-starlette", None)
    print(f"Idle: {connections:,} idle SSE connections; {rounds} rounds")
    for rnd in range(rounds):
        order = ["gateway", "peer"] if rnd % 2 == 0 else ["peer", "gateway"]
        for kind in order:
            kib, sockets = measure(work, kind, connections)
            per_conn[kind].append(kib)
            print(
                f"  round {rnd + 1}/{rounds}: {LABELS[kind]} {kib:.1f} KiB per "
                f"connection ({sockets:,} sockets open in the server)",
                flush=True,
            )
        versus.add(per_conn["gateway"][-1], per_conn["peer"][-1])

    header = f"{'server':<16} {'KiB/conn':>9} {'min-max':>13} {'goal':>8}  result"
    print(f"\nMemory per idle SSE connection, medians of {rounds} rounds")
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


def run_stuck(work: Workdir, rounds: int, count: int, events: int, waves: int) -> None:
    results: dict[str, list[Stuck]] = {"gateway": [], "peer": []}
    print(
        f"\nStuck: {waves} waves of {count} clients that stop reading, {events:,} events to "
        f"replay to each; {rounds} rounds"
    )
    for rnd in range(rounds):
        order = ["gateway", "peer"] if rnd % 2 == 0 else ["peer", "gateway"]
        for kind in order:
            stuck = measure_stuck(work, kind, count, events, waves)
            results[kind].append(stuck)
            seen = "cut off" if stuck.cut_off else "NOT all seen cut off"
            print(
                f"  round {rnd + 1}/{rounds}: {LABELS[kind]} {stuck.first:.1f} KiB RSS per "
                f"stuck client after the first wave's cut-off (peak while stuck "
                f"{stuck.peak:.1f}), {stuck.more:.1f} more per client of the last wave; "
                f"{stuck.held} of {stuck.clients} connections still held, {stuck.kernel:.1f} "
                f"KiB per client unsent in the kernel ({seen}, the slowest wave "
                f"{stuck.seconds:.1f} s after connecting)",
                flush=True,
            )

    def median(values: list[Stuck], field: str) -> float:
        return statistics.median(getattr(v, field) for v in values)

    header = (
        f"{'server':<16} {'1st wave':>9} {'min-max':>15} {'peak':>8} {'last wave':>10} "
        f"{'kernel':>8} {'held':>10}"
    )
    print(
        f"\nWhat a stuck client costs after its cut-off (KiB per client: server RSS after the "
        f"first wave, its peak while stuck, what the last wave added, unsent in the kernel), "
        f"medians of {rounds} rounds"
    )
    print(header)
    print("-" * len(header))
    for kind, values in results.items():
        first = [v.first for v in values]
        held = f"{median(values, 'held'):g}/{values[0].clients}"
        print(
            f"{LABELS[kind]:<16} {statistics.median(first):>9.1f} "
            f"{f'{min(first):.1f}-{max(first):.1f}':>15} {median(values, 'peak'):>8.1f} "
            f"{median(values, 'more'):>10.1f} {median(values, 'kernel'):>8.1f} {held:>10}"
        )
    # What one more stuck client costs: the RSS the last wave added, and the kernel memory
    # still held for the clients. Below 1 KiB the gateway's figure is noise (RSS moves by
    # pages, and a wave can reuse more than it adds), so it is floored there, and the ratio is
    # then a lower bound.
    floor = 1.0
    name = f"RSS + kernel KiB per stuck client (gateway floored at {floor:g})"
    versus = LowerIsBetter(name, None)
    for ours, theirs in zip(results["gateway"], results["peer"], strict=True):
        versus.add(max(floor, ours.cost), theirs.cost)
    print_table("Relative", [versus], "gateway_kit", "peer", unit="KiB per stuck client")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    parser.add_argument("--connections", type=int, default=2000, help="default 2 000")
    parser.add_argument("--dir", default=None, help="where the database file goes (default: TMP)")
    parser.add_argument(
        "--parts", default="idle,stuck", help="idle, stuck or both (default idle,stuck)"
    )
    parser.add_argument("--stuck-rounds", type=int, default=1, help="rounds (default 1)")
    parser.add_argument("--stuck-clients", type=int, default=20, help="per wave (default 20)")
    parser.add_argument("--stuck-waves", type=int, default=2, help="default 2")
    parser.add_argument(
        "--stuck-events", type=int, default=STUCK_EVENTS, help=f"default {STUCK_EVENTS:,}"
    )
    add_server_options(parser)
    args = parser.parse_args()
    apply_server_options(args)
    parts = set(args.parts.split(","))
    if not parts <= {"idle", "stuck"}:
        parser.error(f"unknown parts: {args.parts}")
    raise_open_files(max(NOFILE, args.connections * 2 + 256))

    print(server_stack())
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    try:
        if "idle" in parts:
            run_idle(work, args.rounds, args.connections)
        if "stuck" in parts:
            run_stuck(
                work, args.stuck_rounds, args.stuck_clients, args.stuck_events, args.stuck_waves
            )
    finally:
        work.cleanup()

    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
