"""A Flask app through `Gateway` with its execution observer, against the same without it.

Both servers run at once, each alone in its own uvicorn process with the same settings: the
same `Gateway` (ten no-op plugins, ``allow_anonymous=True``, an `EventLog` on SQLite) around
the same Flask app, one with ``observe_execution=True``, the other with
``observe_execution=False``. Every request carries ``X-Tmux-Session-Id`` (five sessions, in
turn), so the observed server notes each request's start, its stream's opening and its end,
written to its database in batches, and reads every chunk of the answer as it passes.

- **requests/s**: ``POST /v1/chat/completions`` (not streamed), answered with a small
  OpenAI-style JSON whose ``choices[0].finish_reason`` is ``stop``.
- **bytes/s**: the same route with ``"stream": true``: an OpenAI-style SSE stream of
  ``--chunks`` chunks of 1 KiB (``data: {...}``), the last with ``finish_reason: "stop"``, then
  ``data: [DONE]``, read whole by ``--streams`` connections at once, as fast as they can.

The load generator is wrk (Debian package ``wrk``: one thread, keep-alive connections; a Lua
script sends the POST and turns the session header, and reports requests and bytes exactly);
without it, an asyncio httpx client in a separate process, which tops out far below the
servers, so its ratio says little. Each round loads the servers one at a time in the order
A B B A (half the time each; who is A alternates), so that a change in the machine's load
during the round weighs on both alike; each ratio is the median of per-round ratios. The
servers' CPU time per request (and per MB streamed) is printed for information.

At the end the observed server's database must hold a row for every answer and every whole
stream the load generator counted, each ended ``completed`` with ``stop`` but for those in
flight when a load run stopped, and its ``GET /gateway/heartbeat/agent-1`` a state other than
``UNKNOWN``; the other server's must hold none. Otherwise the run fails: an observer that
observed nothing measures nothing.

    .venv/bin/python bench/execution_observer.py          # about 2 minutes
    .venv/bin/python bench/execution_observer.py --rounds 11 --seconds 6 --chunks 5000
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sqlite3
import subprocess
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _apps import CHAT_SESSIONS
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

PATH = "/v1/chat/completions"
SESSION_HEADER = "X-Tmux-Session-Id"
SESSIONS = CHAT_SESSIONS  # held by the servers' one user, whose requests they are
GOAL = 0.95
WARMUP_SECONDS = 2.0
RESULT_TIMEOUT = 120.0
RECORD_TIMEOUT = 30.0  # seconds for the observed server's writer to catch up
MB = 1e6

REQUESTS_TABLE = "gateway_kit_execution_requests"
# The observed requests of each workload, and those of them that ended whole with "stop".
ROWS_OF = {
    "answers": "sse_opened_at IS NULL",
    "streams": "sse_opened_at IS NOT NULL",
}
STOPPED = " AND outcome = 'completed' AND finish_reason = 'stop'"
ROW_KINDS = (
    f"SELECT sse_opened_at IS NOT NULL, outcome, finish_reason, count(*) FROM {REQUESTS_TABLE}"
    " GROUP BY 1, 2, 3 ORDER BY 1, 4 DESC"
)

# A wrk script: the POST with its body, the session header in turn, and an exact tally
# (requests, bytes, microseconds, failures) on one line at the end.
WRK_SCRIPT = """\
local sessions = {%(sessions)s}
local body = [==[%(body)s]==]
local prepared = {}
local turn = 0

function init(args)
  for i, session in ipairs(sessions) do
    local headers = {["Content-Type"] = "application/json", ["%(header)s"] = session}
    prepared[i] = wrk.format("POST", nil, headers, body)
  end
end

function request()
  turn = turn %% #prepared + 1
  return prepared[turn]
end

function done(summary, latency, requests)
  local e = summary.errors
  local failed = e.connect + e.read + e.write + e.status + e.timeout
  io.write(string.format("tally %%d %%d %%d %%d\\n",
    summary.requests, summary.bytes, summary.duration, failed))
end
"""
TALLY = re.compile(r"^tally (\d+) (\d+) (\d+) (\d+)$", re.MULTILINE)


@dataclass(frozen=True)
class Workload:
    """One kind of request, sent by `connections` clients back to back."""

    name: str
    body: str
    connections: int
    script: Path  # the wrk script that sends it

    @classmethod
    def create(
        cls, work: Workdir, name: str, body: dict[str, object], connections: int
    ) -> Workload:
        text = json.dumps(body, separators=(",", ":"))
        script = work.new(name).with_suffix(".lua")
        sessions = ", ".join(f'"{session}"' for session in SESSIONS)
        script.write_text(
            WRK_SCRIPT % {"sessions": sessions, "body": text, "header": SESSION_HEADER}
        )
        return cls(name, text, connections, script)


@dataclass(frozen=True)
class Tally:
    requests: int  # answered whole
    bytes: int
    seconds: float


class Load:
    """One load run of `workload` against `url`, started at once; `result()` waits for it."""

    def __init__(self, url: str, workload: Workload, seconds: float) -> None:
        self.wrk: subprocess.Popen[str] | None = None
        self.httpx: Clients | None = None
        if shutil.which("wrk"):
            command = [
                "wrk", "-t1", f"-c{workload.connections}", f"-d{max(1, round(seconds))}s",
                "--timeout", "30s", "-s", str(workload.script), url,
            ]  # fmt: skip
            self.wrk = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        else:
            job = {
                "mode": "load",
                "url": url,
                "method": "POST",
                "body": workload.body,
                "headers": {"Content-Type": "application/json"},
                "header_variants": [{SESSION_HEADER: session} for session in SESSIONS],
                "concurrency": workload.connections,
                "seconds": seconds,
            }
            self.httpx = Clients(job)
            self.httpx.wait_ready()

    def result(self) -> Tally:
        """What was answered; raises when any answer was not a 200."""
        if self.httpx is not None:
            outcome = self.httpx.result(RESULT_TIMEOUT)
            if outcome["errors"]:
                raise RuntimeError(f"{outcome['errors']} answers were not a 200")
            return Tally(outcome["requests"], outcome["bytes"], outcome["seconds"])
        assert self.wrk is not None
        out, _ = self.wrk.communicate(timeout=RESULT_TIMEOUT)
        tally = TALLY.search(out)
        if self.wrk.returncode or tally is None or int(tally.group(4)):
            raise RuntimeError(f"wrk failed or saw failures:\n{out}")
        requests, received, micros, _ = (int(value) for value in tally.groups())
        return Tally(requests, received, micros / 1e6)


@dataclass
class Side:
    """One server; how many requests of each workload it answered whole."""

    server: Server
    answered: Counter[str] = field(default_factory=Counter)

    def measure(self, workload: Workload, seconds: float) -> tuple[float, float]:
        """Requests/s and server CPU µs per request; for a stream, MB/s and CPU ms per MB."""
        cpu = self.server.cpu_seconds()
        tally = Load(self.server.url + PATH, workload, seconds).result()
        used = self.server.cpu_seconds() - cpu
        self.answered[workload.name] += tally.requests
        if workload.name == "streams":
            return tally.bytes / MB / tally.seconds, used * 1e3 / (tally.bytes / MB)
        return tally.requests / tally.seconds, used * 1e6 / tally.requests


def measure_abba(
    first: Side, second: Side, workload: Workload, seconds: float
) -> tuple[tuple[float, float], tuple[float, float]]:
    """`first`, `second`, `second`, `first`, each for half of `seconds`: a drift in the
    machine's load during the round then weighs on both alike."""
    runs = [s.measure(workload, seconds / 2) for s in (first, second, second, first)]
    return _mean(runs[0], runs[3]), _mean(runs[1], runs[2])


def _mean(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    return (a[0] + b[0]) / 2, (a[1] + b[1]) / 2


def run_rounds(
    observed: Side,
    unobserved: Side,
    workload: Workload,
    args: argparse.Namespace,
    rate: Case,
    cpu: Case,
    units: tuple[str, str],
) -> None:
    for rnd in range(args.rounds):
        if rnd % 2 == 0:
            mine, theirs = measure_abba(observed, unobserved, workload, args.seconds)
        else:
            theirs, mine = measure_abba(unobserved, observed, workload, args.seconds)
        rate.add(mine[0], theirs[0])
        cpu.add(mine[1], theirs[1])
        print(
            f"  {workload.name} round {rnd + 1}/{args.rounds}: {units[0]} observed "
            f"{mine[0]:,.1f}, unobserved {theirs[0]:,.1f}; CPU {units[1]} observed "
            f"{mine[1]:,.1f}, unobserved {theirs[1]:,.1f}",
            flush=True,
        )


def count_rows(db_file: Path, where: str) -> int:
    query = f"SELECT count(*) FROM {REQUESTS_TABLE} WHERE {where}"
    with closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)) as conn:
        return int(conn.execute(query).fetchone()[0])


def row_kinds(db_file: Path) -> str:
    """What the observer wrote: how many rows of each kind, outcome and finish_reason."""
    with closing(sqlite3.connect(f"file:{db_file}?mode=ro", uri=True)) as conn:
        rows = conn.execute(ROW_KINDS).fetchall()
    return ", ".join(
        f"{'stream' if sse else 'answer'} {outcome} {reason}: {count:,}"
        for sse, outcome, reason, count in rows
    )


def recording_shortfall(side: Side, workload: Workload) -> list[str]:
    """What the observed server has not written (yet): for each workload and each tmux
    session, its newest answer, completed with "stop", and no request left open.

    The recorder writes a window of changes at once, and of a session's short requests within
    one window only the one that ended last (a session's state is folded from its newest
    request and answer), and it keeps a session's newest requests only: rows are far fewer
    than requests, but every session has its own."""
    assert side.server.db_file is not None
    short = []
    where = ROWS_OF[workload.name]
    # httpx's client k names the k-th session throughout: fewer clients, fewer sessions.
    for session in SESSIONS[: workload.connections]:
        mine = f"{where} AND tmux_session = '{session}'"
        if not count_rows(side.server.db_file, mine + STOPPED):
            short.append(f"{workload.name}: nothing of {session} completed with stop")
    still_open = count_rows(side.server.db_file, f"{where} AND ended_at IS NULL")
    if still_open:
        short.append(f"{workload.name}: {still_open:,} requests still open")
    return short


def check_recorded(observed: Side, unobserved: Side, workload: Workload) -> str:
    """Raises unless the observed server wrote what it served (its writer is given
    `RECORD_TIMEOUT` to catch up) and the other wrote nothing; else what it wrote."""
    assert observed.server.db_file is not None and unobserved.server.db_file is not None
    deadline = time.monotonic() + RECORD_TIMEOUT
    while short := recording_shortfall(observed, workload):
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"the observer did not record what it served: {'; '.join(short)} "
                f"(rows: {row_kinds(observed.server.db_file)})"
            )
        time.sleep(0.2)
    stray = count_rows(unobserved.server.db_file, "1 = 1")
    if stray:
        raise RuntimeError(f"the server without the observer recorded {stray:,} requests")
    answer = httpx.get(f"{observed.server.url}/gateway/heartbeat/{SESSIONS[0]}", timeout=30.0)
    decision = answer.raise_for_status().json()
    if decision["state"] == "UNKNOWN":
        raise RuntimeError(f"the heartbeat of {SESSIONS[0]} knows nothing: {decision}")
    return (
        f"{workload.name}: observed server's rows: {row_kinds(observed.server.db_file)} "
        f"(answered whole: {observed.answered[workload.name]:,}); "
        f"heartbeat of {SESSIONS[0]}: {decision['state']} ({decision['reason']}); "
        "the unobserved server's rows: none"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds per case (default 7)")
    parser.add_argument("--seconds", type=float, default=4.0, help="per server per round (4)")
    parser.add_argument("--connections", type=int, default=16, help="requests/s case (16)")
    parser.add_argument("--streams", type=int, default=4, help="streams read at once (4)")
    parser.add_argument("--chunks", type=int, default=2000, help="1 KiB chunks a stream (2000)")
    parser.add_argument("--dir", default=None, help="where the database files go (default: TMP)")
    add_server_options(parser)
    args = parser.parse_args()
    apply_server_options(args)

    generator = "wrk -t1" if shutil.which("wrk") else "httpx (wrk not found: apt-get install wrk)"
    rps = Case(f"POST {PATH}: requests/s", GOAL)
    sse = Case(f"SSE of {args.chunks:,} x 1 KiB: MB/s", GOAL)
    cpu = LowerIsBetter("requests/s: server CPU per request (x lower)", None)
    cpu_sse = LowerIsBetter("SSE: server CPU per MB (x lower)", None)
    print(
        f"{server_stack()}; load: {generator}, {args.connections} connections (JSON), "
        f"{args.streams} (SSE); {args.rounds} rounds of {args.seconds:g} s per server per case"
    )
    print(f"At the start: {machine_load()}")
    work = Workdir(args.dir)
    messages = [{"role": "user", "content": "Say hello."}]
    answers = Workload.create(
        work, "answers", {"model": "bench", "messages": messages}, args.connections
    )
    streams = Workload.create(
        work,
        "streams",
        {"model": "bench", "messages": messages, "stream": True, "max_tokens": args.chunks},
        args.streams,
    )
    try:
        with (
            Server(work, "chat-observed", db=True) as observed_server,
            Server(work, "chat-unobserved", db=True) as unobserved_server,
        ):
            observed, unobserved = Side(observed_server), Side(unobserved_server)
            for side in (observed, unobserved):
                for workload in (answers, streams):
                    side.measure(workload, WARMUP_SECONDS)
            # Checked after each workload: the recorder keeps each session's newest requests
            # only, so the answers' rows make way for the streams' that follow them.
            run_rounds(observed, unobserved, answers, args, rps, cpu, ("requests/s", "us/request"))
            recorded = [check_recorded(observed, unobserved, answers)]
            run_rounds(observed, unobserved, streams, args, sse, cpu_sse, ("MB/s", "ms/MB"))
            recorded.append(check_recorded(observed, unobserved, streams))
    finally:
        work.cleanup()
    cases = [rps, sse, cpu, cpu_sse]
    title = "Execution observer (ratio: observed / unobserved)"
    print_table(title, cases, "observed", "unobserved")
    for line in recorded:
        print(f"\nRecorded: {line}")
    print(f"\nAt the end: {machine_load()}")


if __name__ == "__main__":
    main()
