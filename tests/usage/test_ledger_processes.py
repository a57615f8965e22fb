"""Two processes delivering the same bills to the usage ledger at the same moment, on
PostgreSQL: each bill is counted once, and each day's totals hold each run once."""

from __future__ import annotations

import subprocess
import sys

from gateway_kit import EventLog
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.usage import UsageLedger
from tests.support.processes import ROOT

from .billing import entries

BILLS = 200


def test_two_processes_delivering_the_same_bills_count_each_once(pg_url: str) -> None:
    with EventLog(pg_url) as log:
        StreamOwners(log).declare("conv", "alice")
        command = [sys.executable, "-m", "tests.usage.ledger_process", pg_url, str(BILLS)]
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
        processes = [subprocess.Popen(command, cwd=ROOT, text=True, **pipes) for _ in range(2)]
        try:
            for process in processes:
                assert process.stdout is not None
                assert process.stdout.readline() == "ready\n", process.stdout.read()
            for process in processes:  # both go at once: their deliveries overlap
                assert process.stdin is not None
                process.stdin.write("go\n")
                process.stdin.flush()
            said = [process.communicate(timeout=60)[0] for process in processes]
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                    process.wait()
        recorded = entries(log)
        totals = UsageLedger(log).totals("alice")
        per_day = UsageLedger(log).days("alice")

    assert [process.returncode for process in processes] == [0, 0], said
    assert len(recorded) == BILLS and {row[1] for row in recorded} == {"alice"}
    assert totals.runs == BILLS
    assert totals.input_tokens == sum(n + 1 for n in range(BILLS))
    assert totals.output_tokens == BILLS
    assert {day.day for day in per_day} == {row[2] for row in recorded}
