"""``gateway-kit bills``: the billing outbox as a table."""

from __future__ import annotations

import json
import time

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.log.transaction import Transaction
from gateway_kit.runs.bills import idempotency_key
from gateway_kit.runs.model import Run, RunStatus
from gateway_kit.runs.store import RunStore, write_ending

USAGE = {"input_tokens": 17, "output_tokens": 8, "total_tokens": 25, "cost": 0.0125}


def ended_run(log: EventLog, store: RunStore, run_id: str) -> Run:
    run = Run(run_id, "conv", "session", f"request-{run_id}", RunStatus.ACTIVE, 1, False, "hi",
              time.time())  # fmt: skip
    store.create(run)

    def bill(transaction: Transaction, events: object) -> None:
        write_ending(transaction, run, RunStatus.FINISHED, USAGE)

    log.end_run("conv", "Finish", run_id=run_id, also=bill)
    return run


def test_bills_lists_what_was_billed_and_what_is_still_pending(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        store = RunStore(log)
        ended_run(log, store, "r-delivered")
        ended_run(log, store, "r-pending")
        claimed = store.claim_bill("r-delivered", "me", 30)
        assert claimed is not None
        store.bill_delivered("r-delivered", "me")
        store.claim_bill("r-pending", "me", 30)
        store.bill_failed("r-pending", "me", "ledger down", time.time() + 60)

    assert main(["bills", "--db", log_url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run", "stream", "status", "input", "output", "total", "cost",
                                "tries", "delivered"]  # fmt: skip
    delivered = next(line for line in lines if line.startswith("r-delivered"))
    assert delivered.split()[:8] == ["r-delivered", "conv", "finished", "17", "8", "25",
                                     "0.0125", "1"]  # fmt: skip
    pending = next(line for line in lines if line.startswith("r-pending"))
    assert "pending (ledger down)" in pending

    assert main(["bills", "--db", log_url, "--undelivered", "--json"]) == 0
    [only] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert only["run_id"] == "r-pending" and only["usage"] == USAGE
    assert only["idempotency_key"] == idempotency_key("r-pending")
    assert only["delivered_at"] is None and only["last_error"] == "ledger down"
