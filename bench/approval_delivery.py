"""Decision → goose confirmation: from a client's ``POST /gateway/approvals/{id}/decision`` to
goose receiving ``POST /action-required/tool-confirmation``, against one ``POST`` round trip
to the same fake goose, measured in the same run.

Three processes, as deployed: the fake goose (`FakeGoose` in approve mode, ``_apps.py
goose-approve``), noting ``time.perf_counter()`` as each confirmation request arrives (on Linux
CLOCK_MONOTONIC: one clock for every process of the machine); the `Gateway` (``_apps.py
gateway-approvals``: an `EventLog` on a SQLite file, ten no-op plugins), whose `GooseUpstream`
reaches that goose over HTTP, noting as each decision request arrives; and this process, the
client, with one keep-alive httpx client per server.

Each sample is one run: the client starts a run whose goose asks to run a tool, waits for the
approval to be listed, then:

- *baseline*: ``POST /action-required/tool-confirmation`` to the fake goose (an id of a session
  goose does not know: it answers 200 and drops it), sent by the gateway process itself, with
  its own `GooseUpstream` in its own event loop (``GET /bench/baseline`` asks it for one and
  the time it took): one round trip, the way a decision's confirmation goes. The same POST from
  this process with httpx's sync client is printed too;
- *decision*: ``POST /gateway/approvals/{id}/decision``, timed from the moment the gateway
  process receives it (a thin ASGI layer around the `Gateway` notes it) to the moment goose receives
  the confirmation the decision makes: what the gateway adds between a person's decision and
  goose hearing of it. The decision is committed first (row, audit and event in one
  transaction), then sent. The time from the client's call is printed too: it adds the
  client's own hop to the gateway, a second HTTP request the baseline does not make.

- *floor*: one commit of a row to raw sqlite3 (WAL, ``synchronous=FULL``: the log's
  durability), then that POST with the sync client: the least a decision that is durable
  before goose hears of it could cost.

A baseline and a floor come right before every decision, so that all see the machine alike.
Each round is a fresh log and servers; the first runs warm up and are not counted. The verdict
is the median over rounds of decision p99 / baseline p99.

    .venv/bin/python bench/approval_delivery.py               # about 1 minute on 2 cores
    .venv/bin/python bench/approval_delivery.py --rounds 5 --samples 300
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from _apps import GOOSE_URL_VAR, durable_commit
from _harness import Server, Workdir, machine_load, percentile

from gateway_kit.gateway import ANONYMOUS_WARNING
from gateway_kit.testing.fake_state import DEFAULT_SECRET_KEY

GOAL = 1.5  # decision p99 at most this times the baseline's p99
CONFIRMATIONS = "/action-required/tool-confirmation"
WARMUP = 10
WAIT = 20.0
SETTLE = 0.05  # s after a decision before the run's end is polled


@dataclass
class Round:
    baseline: list[float] = field(default_factory=list)  # ms
    sync: list[float] = field(default_factory=list)  # ms: the same POST, httpx's sync client
    floor: list[float] = field(default_factory=list)  # ms: a durable commit, then the POST
    decision: list[float] = field(default_factory=list)  # ms, from the gateway's receipt
    client: list[float] = field(default_factory=list)  # ms, from the client's call

    def p(self, which: str, pct: float) -> float:
        return percentile(getattr(self, which), pct)


def wait_for(check: Any, what: str) -> Any:
    deadline = time.monotonic() + WAIT
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not happen within {WAIT:g} s")
        time.sleep(0.005)


def pending(client: httpx.Client, stream: str) -> list[dict[str, Any]]:
    answer = client.get(f"/gateway/streams/{stream}/approvals").json()
    return [a for a in answer["approvals"] if a["status"] == "pending"]


def ended(client: httpx.Client, run_id: str) -> bool:
    return bool(client.get(f"/gateway/runs/{run_id}").json()["status"] != "active")


def one_round(samples: int, work: Workdir, number: int) -> Round:
    result = Round()
    with Server(work, "goose-approve") as goose_server:
        os.environ[GOOSE_URL_VAR] = goose_server.url
        sent: dict[str, tuple[str, float]] = {}  # call id → (approval id, the client's call)
        baselines: list[float] = []
        sync_baselines: list[float] = []
        floors: list[float] = []
        commit = durable_commit(work.new(f"floor-{number}"))
        with (
            Server(work, "gateway-approvals", db=True) as gateway_server,
            httpx.Client(base_url=gateway_server.url, timeout=WAIT) as client,
            httpx.Client(
                base_url=goose_server.url,
                timeout=WAIT,
                headers={"X-Secret-Key": DEFAULT_SECRET_KEY},
            ) as goose,
        ):
            prefix = f"bench-{number}-{time.time_ns()}"
            for n in range(samples + WARMUP):
                call_id, stream = f"call_{number}_{n}", f"{prefix}-{n}"
                run = client.post(f"/gateway/streams/{stream}/runs", json={"message": call_id})
                run.raise_for_status()
                approval = wait_for(lambda s=stream: pending(client, s), "the approval")[0]
                body = {"id": f"baseline_{n}", "action": "allow_once", "sessionId": "none"}
                baseline = client.get("/bench/baseline").json()["ms"] / 1000
                started = time.perf_counter()
                goose.post(CONFIRMATIONS, json=body).raise_for_status()
                sync_baseline = time.perf_counter() - started
                started = time.perf_counter()
                commit({"stream": stream, "type": "decided", "data": {"n": n}})
                goose.post(CONFIRMATIONS, json=body).raise_for_status()
                floor = time.perf_counter() - started
                started = time.perf_counter()
                decided = client.post(
                    f"/gateway/approvals/{approval['approval_id']}/decision",
                    json={"decision": "approve", "args_hash": approval["args_hash"]},
                )
                decided.raise_for_status()
                # Polled later: a poll at once would share the gateway's loop with the
                # sending it measures.
                time.sleep(SETTLE)
                run_id = run.json()["run_id"]
                wait_for(lambda key=run_id: ended(client, key), "the run's end")
                if n >= WARMUP:
                    sent[call_id] = (approval["approval_id"], started)
                    baselines.append(baseline * 1000)
                    sync_baselines.append(sync_baseline * 1000)
                    floors.append(floor * 1000)
            arrived = goose.get("/bench/arrivals").json()
            received = client.get("/bench/decisions").json()
    for call_id, (approval_id, started) in sent.items():
        result.decision.append((arrived[call_id] - received[approval_id]) * 1000)
        result.client.append((arrived[call_id] - started) * 1000)
    result.baseline, result.sync, result.floor = baselines, sync_baselines, floors
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=150, help="decisions per round")
    args = parser.parse_args()
    logging.getLogger("gateway_kit.gateway").addFilter(
        lambda r: r.getMessage() != ANONYMOUS_WARNING
    )
    print(f"approval delivery: {args.rounds} rounds x {args.samples} decisions; {machine_load()}")
    print("log: a SQLite file per round; goose, the gateway and this client each in a process")
    ratios, floor_ratios, floors = [], [], []
    work = Workdir()
    try:
        for number in range(args.rounds):
            result = one_round(args.samples, work, number)
            ratio = result.p("decision", 99) / result.p("baseline", 99)
            ratios.append(ratio)
            floor_ratios.append(result.p("decision", 99) / result.p("floor", 99))
            floors.append(result.p("floor", 99) / result.p("baseline", 99))
            print(
                f"round {number + 1}: baseline p50 {result.p('baseline', 50):.2f} ms "
                f"p99 {result.p('baseline', 99):.2f} ms (sync client p50 "
                f"{result.p('sync', 50):.2f} p99 {result.p('sync', 99):.2f}) | "
                f"decision → goose p50 "
                f"{result.p('decision', 50):.2f} ms p99 {result.p('decision', 99):.2f} ms | "
                f"p99 ratio {ratio:.2f} | floor (durable commit + POST) p50 "
                f"{result.p('floor', 50):.2f} ms p99 {result.p('floor', 99):.2f} ms, decision p99 "
                f"/ floor p99 {result.p('decision', 99) / result.p('floor', 99):.2f} | "
                f"from the client's call: p50 "
                f"{result.p('client', 50):.2f} ms p99 {result.p('client', 99):.2f} ms"
            )
    finally:
        work.cleanup()
    ratio = statistics.median(ratios)
    verdict = "MET" if ratio <= GOAL else "MISS"
    spread = f"{min(ratios):.2f} to {max(ratios):.2f}"
    print(
        f"decision p99 / one POST round trip p99: {ratio:.2f} (rounds {spread}); "
        f"goal ≤ {GOAL}: {verdict}"
    )
    print(
        f"the floor (durable commit + POST) p99 / one POST round trip p99: "
        f"{statistics.median(floors):.2f}; decision p99 / floor p99: "
        f"{statistics.median(floor_ratios):.2f} ({min(floor_ratios):.2f} to "
        f"{max(floor_ratios):.2f})"
    )


if __name__ == "__main__":
    main()
