"""One process delivering bills to the usage ledger plugin, for the two-process test.

    python -m tests.usage.ledger_process DB_URL COUNT

Configures the `usage_ledger` plugin on the log at DB_URL, prints ``ready``, waits for a line
on stdin, then delivers the bills of runs ``run-0`` … ``run-{COUNT-1}`` of stream ``conv``
(run ``run-N`` used N+1 input tokens and 1 output token) and prints ``done``.
"""

from __future__ import annotations

import sys

from gateway_kit_plugins.usage_ledger import UsageLedgerPlugin

from gateway_kit import EventLog
from gateway_kit.hooks import PluginContext
from gateway_kit.runs.bills import idempotency_key

from .billing import ended, usage


def main() -> None:
    db_url, count = sys.argv[1], int(sys.argv[2])
    with EventLog(db_url) as log:
        plugin = UsageLedgerPlugin()
        plugin.configure_plugin({}, PluginContext(log=log))
        print("ready", flush=True)
        sys.stdin.readline()  # the test starts both processes' deliveries at once
        for n in range(count):
            run_id = f"run-{n}"
            plugin.bill_run(ended(run_id, "conv"), usage(n + 1, 1), idempotency_key(run_id))
    print("done", flush=True)


if __name__ == "__main__":
    main()
