"""Billing across gateway processes on PostgreSQL: each run is billed once, with one key.

The gateways are real processes (`tests.runs.billing_process`) whose `bill_run` records into a
ledger table of the test's schema; goose is the fake goose served over real HTTP, in a thread of
the test process (as in `tests.upstream.test_takeover`).
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import sqlalchemy as sa

from gateway_kit import EventLog
from gateway_kit.runs.bills import idempotency_key
from gateway_kit.runs.store import RunStore
from gateway_kit.runs.tables import bills
from gateway_kit.testing import FakeGoose
from tests.support.processes import GatewayProcess, gateway_process
from tests.support.serving import serve_in_thread
from tests.support.waiting import settled, wait_until

from .billing_process import DIE, LEDGER, METADATA


@contextmanager
def billing_gateway(
    db_url: str, goose_url: str, secret: str, tmp: Path, name: str, *, die: bool = False
) -> Iterator[GatewayProcess]:
    """A gateway process whose `bill_run` records in `LEDGER` as `name` (or, `die`, kills it)."""
    args = (db_url, goose_url, secret, name, *([DIE] if die else []))
    with gateway_process("tests.runs.billing_process", *args, tmp=tmp, name=name) as process:
        yield process


def wait_for(condition: Callable[[], object], failure: Callable[[], str]) -> None:
    try:
        wait_until(condition, timeout=20)
    except AssertionError:
        raise AssertionError(failure()) from None


def delivered(store: RunStore, run_id: str) -> bool:
    bill = store.bill(run_id)
    return bill is not None and bill.delivered_at is not None


def claimed_until(log: EventLog, run_id: str) -> float | None:
    with log.tables.engine.connect() as conn:
        query = sa.select(bills.c.claimed_until).where(bills.c.run_id == run_id)
        until: float | None = conn.execute(query).scalar_one()
        return until


def ledger(log: EventLog) -> list[tuple[str, str, str, int]]:
    """(key, run, billing process, calls with that key) for every bill the consumer holds."""
    with log.tables.engine.connect() as conn:
        rows = conn.execute(sa.select(LEDGER).order_by(LEDGER.c.run_id))
        return [(r.idempotency_key, r.run_id, r.billed_by, r.calls) for r in rows]


def start_run(gateway: GatewayProcess, message: str) -> str:
    started = httpx.post(f"{gateway.url}/gateway/streams/conv/runs", json={"message": message})
    assert started.status_code == 200, started.text
    run_id: str = started.json()["run_id"]
    return run_id


def sse_types(text: str) -> list[str]:
    """The types of the events in an SSE body (each `data:` line is one event's envelope)."""
    return [json.loads(line[6:])["type"] for line in text.splitlines() if line.startswith("data: ")]


def test_a_bill_whose_process_died_delivering_it_is_delivered_once_by_the_survivor(
    pg_url: str, tmp_path: Path
) -> None:
    fake = FakeGoose(ping_interval=0.2)
    with EventLog(pg_url) as log, serve_in_thread(fake, lifespan="off") as goose_url:
        METADATA.create_all(log.tables.engine)
        store = RunStore(log)
        with (
            billing_gateway(pg_url, goose_url, fake.secret_key, tmp_path, "A", die=True) as a,
            billing_gateway(pg_url, goose_url, fake.secret_key, tmp_path, "B") as b,
        ):
            run_id = start_run(a, "bill me once")  # A pumps the session and ends the run
            wait_for(lambda: a.proc.poll() is not None, a.said)
            settled(log)  # what A committed, once no older transaction holds it back
            at_death = [e.type for e in log.read(run_id=run_id)]
            bill_at_death = store.bill(run_id)
            claim_at_death = claimed_until(log, run_id)
            wait_for(lambda: delivered(store, run_id), b.said)
            state = httpx.get(f"{b.url}/gateway/runs/{run_id}").json()
            settled(log)
            types = [e.type for e in log.read(run_id=run_id)]
            bill = store.bill(run_id)
            billed = ledger(log)
            assert b.proc.poll() is None, b.said()

    assert a.proc.returncode == -signal.SIGKILL, a.said()
    # A died after the run's end was committed, holding the claim of a bill it never delivered.
    assert at_death.count("Finish") == 1
    assert bill_at_death is not None
    assert (bill_at_death.tries, bill_at_death.delivered_at) == (1, None)
    assert state["status"] == "finished"
    assert types.count("Finish") == 1 and types == at_death  # B appended nothing
    assert bill is not None and bill.idempotency_key == idempotency_key(run_id)
    assert bill.tries == 2 and bill.last_error is None  # A's claim, then B's
    # B waited for A's claim to run out: A might have been delivering still.
    assert claim_at_death is not None and bill.delivered_at is not None
    assert bill.delivered_at > claim_at_death
    assert billed == [(idempotency_key(run_id), run_id, "B", 1)]


def test_replaying_a_finished_run_to_clients_does_not_bill_it_again(
    pg_url: str, tmp_path: Path
) -> None:
    fake = FakeGoose(ping_interval=0.2)
    with EventLog(pg_url) as log, serve_in_thread(fake, lifespan="off") as goose_url:
        METADATA.create_all(log.tables.engine)
        store = RunStore(log)
        with billing_gateway(pg_url, goose_url, fake.secret_key, tmp_path, "A") as a:
            first = start_run(a, "one")
            wait_for(lambda: delivered(store, first), a.said)
            for _ in range(2):
                replay = httpx.get(f"{a.url}/gateway/runs/{first}/events")  # ends after Finish
                assert sse_types(replay.text)[-1] == "Finish"
                page = httpx.get(
                    f"{a.url}/gateway/streams/conv/events",
                    params={"after": "0"},
                    headers={"Accept": "application/json"},
                ).json()
                assert [e["type"] for e in page["events"]].count("Finish") == 1
            # The stream's next run re-reads goose's session, the first run's Finish included;
            # its own bill is delivered by the same outbox, after the replays.
            second = start_run(a, "two")
            wait_for(lambda: delivered(store, second), a.said)
            bills = {bill.run_id: bill.tries for bill in store.bills()}
            billed = ledger(log)

    assert bills == {first: 1, second: 1}
    expected = [(idempotency_key(run), run, "A", 1) for run in (first, second)]
    assert billed == sorted(expected, key=lambda row: row[1])
