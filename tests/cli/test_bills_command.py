"""``gateway-kit bills``: the billing outbox as a table, and a user's usage ledger."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.log.transaction import Transaction
from gateway_kit.runs.bills import idempotency_key
from gateway_kit.runs.model import Run, RunStatus
from gateway_kit.runs.store import RunStore, write_ending
from gateway_kit.usage import UsageLedger, entry_of

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


def ledger_of_two_users(log: EventLog) -> None:
    """Two runs of alice (today, and on 2026-01-02) and one of bob, in the usage ledger."""
    ledger = UsageLedger(log)
    for run_id, stream, user, ended_at in [
        ("a1", "alice-notes", "alice", time.time()),
        ("a2", "alice-notes", "alice", datetime(2026, 1, 2, 12, tzinfo=UTC).timestamp()),
        ("b1", "bob-notes", "bob", time.time()),
    ]:
        run = Run(run_id, stream, "session", f"request-{run_id}", RunStatus.FINISHED, 1, False,
                  "hi", ended_at, ended_at)  # fmt: skip
        ledger.record(entry_of(run, USAGE, idempotency_key(run_id), user, time.time()))


def test_bills_of_a_user_lists_what_the_usage_ledger_holds_of_their_runs(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        ledger_of_two_users(log)

    assert main(["bills", "--db", log_url, "--user", "alice", "--json"]) == 0
    out = capsys.readouterr().out
    lines = [json.loads(line) for line in out.splitlines()]  # nothing but JSON on stdout
    assert sorted(line["run_id"] for line in lines) == ["a1", "a2"]
    [older] = [line for line in lines if line["run_id"] == "a2"]
    assert older == {
        "idempotency_key": idempotency_key("a2"), "run_id": "a2", "user_id": "alice",
        "stream": "alice-notes", "day": "2026-01-02", "input_tokens": 17, "output_tokens": 8,
        "total_tokens": 25, "cache_read_tokens": 0, "cache_write_tokens": 0, "cost": 0.0125,
        "billed_at": older["billed_at"],
    }  # fmt: skip

    assert main(["bills", "--db", log_url, "--user", "alice", "--until", "2026-01-31"]) == 0
    header, *rows = capsys.readouterr().out.splitlines()
    assert header.split() == ["run", "stream", "day", "input", "output", "total", "cost"]
    assert [row.split() for row in rows] == [
        ["a2", "alice-notes", "2026-01-02", "17", "8", "25", "0.0125"]
    ]
    assert main(["bills", "--db", log_url, "--user", "carol", "--json"]) == 0
    assert capsys.readouterr().out == ""  # nobody's runs: no lines


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--user", "alice", "--since", "last week"], "--since must be a day as YYYY-MM-DD"),
        (["--user", "alice", "--until", "2026-02-30"], "--until must be a day"),
        (["--user", "alice", "--undelivered"], "use one of them"),
        (["--since", "2026-01-01"], "need --user"),
        (["--user", ""], "user"),
    ],
)
def test_bills_of_a_user_that_cannot_be_listed_is_one_line_on_stderr(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    assert main(["bills", "--db", sqlite_url, "--json", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("gateway-kit bills: ") and said in err
    assert "Traceback" not in err
