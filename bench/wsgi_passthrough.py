"""A plain Flask route through `Gateway` against the same app under bare `a2wsgi`.

Both servers run at once, each alone in its own uvicorn process with the same settings, and
both mount the app through `a2wsgi.WSGIMiddleware` with the same 10 threads; the gateway's also
opens an `EventLog` (SQLite), which this route never touches. ``GET /hello`` returns a small
JSON object. The load generator is wrk (Debian package ``wrk``: one thread, a fixed number of
keep-alive connections); without it, an asyncio httpx client in a separate process, which tops
out far below the servers, so its ratio says little.

Each round loads the servers one at a time in the order A B B A (half the time each; who is A
alternates), so that a change in the machine's load during the round weighs on both alike; the
ratio is the median of per-round ratios. Two steadier views are printed for information: the
server CPU time per request, and both servers loaded at once (sharing whatever the machine has).

With ``--identity cookie`` every request carries a signed Flask session cookie (both sides get
the same header): the gateway is strict and its identity stage resolves the cookie of every
request, with the app's key (goal ≥ 0.85); bare a2wsgi's Flask route never opens the session.

    .venv/bin/python bench/wsgi_passthrough.py          # about 1.5 minutes
    .venv/bin/python bench/wsgi_passthrough.py --identity cookie
    .venv/bin/python bench/wsgi_passthrough.py --rounds 15 --seconds 6 --connections 32
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shutil
import statistics
import subprocess
import time
from typing import Any

from _apps import hello_flask, noop_plugins
from _common import Case, print_table
from _harness import (
    Clients,
    LowerIsBetter,
    Server,
    Workdir,
    add_server_options,
    apply_server_options,
    machine_load,
    server_stack,
)

from gateway_kit import EventLog, Gateway

PATH = "/hello"
WARMUP_SECONDS = 2.0
RESULT_TIMEOUT = 120.0
DISPATCH_CALLS = 20_000
DISPATCH_ROUNDS = 5
GOALS = {"none": 0.90, "cookie": 0.85}
HEADERS: dict[str, str] = {}  # sent with every request of the load, to both servers alike


def session_cookie() -> str:
    """A session cookie as the hello app signs one: a logged-in user and a login id."""
    app = hello_flask()
    serializer = app.session_interface.get_signing_serializer(app)  # type: ignore[attr-defined]
    value = serializer.dumps({"username": "bench", "login_id": "l-1", "csrf_token": "c"})
    return f"session={value}"


class Load:
    """One load run against `url`, started at once; `result()` waits for it to end."""

    def __init__(self, url: str, connections: int, seconds: float) -> None:
        self.wrk: subprocess.Popen[str] | None = None
        self.httpx: Clients | None = None
        if shutil.which("wrk"):
            command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds:g}s", url]
            for name, value in HEADERS.items():
                command += ["-H", f"{name}: {value}"]
            self.wrk = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        else:
            job = {
                "mode": "load",
                "url": url,
                "concurrency": connections,
                "seconds": seconds,
                "headers": HEADERS,
            }
            self.httpx = Clients(job)
            self.httpx.wait_ready()

    def result(self) -> int:
        """Requests answered; raises when any answer was not a 200."""
        if self.httpx is not None:
            outcome = self.httpx.result(RESULT_TIMEOUT)
            if outcome["errors"]:
                raise RuntimeError(f"{outcome['errors']} answers were not a 200")
            return int(outcome["requests"])
        assert self.wrk is not None
        out, _ = self.wrk.communicate(timeout=RESULT_TIMEOUT)
        done = re.search(r"(\d+) requests in", out)
        if self.wrk.returncode or done is None or "Non-2xx" in out or "Socket errors" in out:
            raise RuntimeError(f"wrk failed or saw failures:\n{out}")
        return int(done.group(1))


def measure(server: Server, seconds: float, connections: int) -> tuple[float, float]:
    """Requests/s, and server CPU microseconds per request."""
    cpu = server.cpu_seconds()
    start = time.perf_counter()
    done = Load(server.url + PATH, connections, seconds).result()
    elapsed = time.perf_counter() - start
    return done / elapsed, (server.cpu_seconds() - cpu) / done * 1e6


def measure_abba(
    first: Server, second: Server, seconds: float, connections: int
) -> tuple[tuple[float, float], tuple[float, float]]:
    """`first`, `second`, `second`, `first`, each for half of `seconds`: a drift in the
    machine's load during the round then weighs on both alike."""
    runs = [measure(s, seconds / 2, connections) for s in (first, second, second, first)]
    return _mean(runs[0], runs[3]), _mean(runs[1], runs[2])


def _mean(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return (a[0] + b[0]) / 2, (a[1] + b[1]) / 2


def measure_together(
    first: Server, second: Server, seconds: float, connections: int
) -> tuple[float, float]:
    """Both servers under load at the same time: they share whatever the machine has."""
    loads = [Load(s.url + PATH, connections, seconds) for s in (first, second)]
    first_done, second_done = (load.result() for load in loads)
    return first_done / seconds, second_done / seconds


async def _calls(app: Any, count: int) -> float:
    """Seconds for `count` requests to `app`, called directly: no server, no socket."""
    scope = {"type": "http", "method": "GET", "path": PATH, "root_path": "", "headers": []}

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        pass

    start = time.perf_counter()
    for _ in range(count):
        await app(scope, receive, send)
    return time.perf_counter() - start


def dispatch_overhead(work: Workdir, count: int = DISPATCH_CALLS) -> float:
    """Microseconds `Gateway` adds to a request it passes on, measured in this process around
    a trivial ASGI app (a2wsgi and Flask left out: they cost the same on both sides)."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    with EventLog(f"sqlite:///{work.new('dispatch').with_suffix('.db')}") as log:
        gateway = Gateway(
            app,
            log=log,
            wsgi=False,
            plugins=noop_plugins(),
            load_entry_points=False,
            allow_anonymous=True,
        )
        rounds = [
            (asyncio.run(_calls(gateway, count)), asyncio.run(_calls(app, count)))
            for _ in range(DISPATCH_ROUNDS)
        ]
    return statistics.median(ours - bare for ours, bare in rounds) / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--seconds", type=float, default=4.0, help="per server per round (4)")
    parser.add_argument("--connections", type=int, default=16, help="keep-alive (default 16)")
    parser.add_argument("--dir", default=None, help="where the database file goes (default: TMP)")
    parser.add_argument(
        "--identity",
        choices=sorted(GOALS),
        default="none",
        help="none: anonymous pass-through (goal 0.90); cookie: every request's Flask session "
        "cookie resolved by a strict Gateway (goal 0.85)",
    )
    add_server_options(parser)
    args = parser.parse_args()
    apply_server_options(args)
    kind = "hello-gateway" if args.identity == "none" else "hello-gateway-cookie"
    if args.identity == "cookie":
        HEADERS["Cookie"] = session_cookie()

    generator = "wrk -t1" if shutil.which("wrk") else "httpx (wrk not found: apt-get install wrk)"
    rps = Case(f"GET {PATH}: requests/s, Gateway vs bare", GOALS[args.identity])
    # Server CPU per request is steadier than requests/s when other work shares the machine.
    cpu = LowerIsBetter(f"GET {PATH}: server CPU per request (x lower)", None)
    together = Case(f"GET {PATH}: requests/s, both loaded at once", None)
    print(
        f"{server_stack()}; load: {generator}, {args.connections} connections; "
        f"{args.rounds} rounds of {args.seconds:g} s per server; identity: {args.identity}"
    )
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    try:
        with Server(work, kind, db=True) as ours, Server(work, "hello-bare") as bare:
            for server in (ours, bare):
                measure(server, WARMUP_SECONDS, args.connections)
            for rnd in range(args.rounds):
                if rnd % 2 == 0:
                    mine, theirs = measure_abba(ours, bare, args.seconds, args.connections)
                else:
                    theirs, mine = measure_abba(bare, ours, args.seconds, args.connections)
                rps.add(mine[0], theirs[0])
                cpu.add(mine[1], theirs[1])
                if rnd % 2 == 0:
                    together.add(*measure_together(ours, bare, args.seconds / 2, args.connections))
                else:
                    pair = measure_together(bare, ours, args.seconds / 2, args.connections)
                    together.add(pair[1], pair[0])
                print(
                    f"  round {rnd + 1}/{args.rounds}: requests/s Gateway {mine[0]:,.0f}, bare "
                    f"{theirs[0]:,.0f}; CPU us/request Gateway {mine[1]:,.0f}, bare "
                    f"{theirs[1]:,.0f}; at once: Gateway {together.ours[-1]:,.0f}, bare "
                    f"{together.theirs[-1]:,.0f}",
                    flush=True,
                )
        added = dispatch_overhead(work)
    finally:
        work.cleanup()
    per_request = statistics.median(cpu.theirs)
    rps.notes.append(
        f"Gateway's own dispatch, in process: {added:.1f} us per request, "
        f"{added / per_request:.2%} of the {per_request:,.0f} us a request costs the bare server"
    )
    cases = [rps, cpu, together]
    print_table("Pass-through (ratio: Gateway's advantage)", cases, "Gateway", "bare")
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
