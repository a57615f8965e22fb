"""One gateway process whose `bill_run` is a ledger in the database, for multi-process tests.

    python -m tests.runs.billing_process PORT_FILE DB_URL GOOSE_URL SECRET NAME [--die]

Serves a Gateway with a goose upstream on a free loopback port (written to PORT_FILE) and a
quick billing outbox. Its `bill_run` records the bill in `LEDGER` as process NAME; with
``--die`` it kills its own process with SIGKILL instead, before recording anything.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream, hookimpl
from gateway_kit.runs.billing import BillingSettings
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from tests.support.processes import serve_app
from tests.support.upstream_process import TAKEOVER

DIE = "--die"
# A killed process's claim runs out after three seconds (long enough for a loaded machine's
# process to reach its own delivery first); survivors look for due bills every 0.1 s.
QUICK_BILLING = BillingSettings(
    claim_ttl=3.0, retry_delay=0.2, max_retry_delay=1.0, scan_interval=0.1, timeout=5.0
)

METADATA = sa.MetaData()
# What a consumer that honours the key has billed: one row per key, and how often it was asked.
LEDGER = sa.Table(
    "test_billing_ledger",
    METADATA,
    sa.Column("idempotency_key", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("billed_by", sa.Text, nullable=False),  # the process whose call billed it
    sa.Column("calls", sa.Integer, nullable=False),  # calls with this key, the first included
)


class Ledger:
    __name__ = "db-ledger"

    def __init__(self, engine: sa.Engine, process: str, *, die: bool) -> None:
        self.engine = engine
        self.process = process
        self.die = die

    @hookimpl
    def bill_run(self, run: Any, usage: dict[str, Any], idempotency_key: str) -> None:
        if self.die:
            os.kill(os.getpid(), signal.SIGKILL)  # the bill is claimed here and never delivered
        insert = postgresql.insert(LEDGER).values(
            idempotency_key=idempotency_key, run_id=run.run_id, billed_by=self.process, calls=1
        )
        again = insert.on_conflict_do_update(
            index_elements=[LEDGER.c.idempotency_key], set_={"calls": LEDGER.c.calls + 1}
        )
        with self.engine.begin() as conn:
            conn.execute(again)


def main() -> None:
    port_file, db_url, goose_url, secret, name = sys.argv[1:6]
    log = EventLog(db_url)
    gateway = Gateway(
        log=log,
        upstream=GooseUpstream(base_url=goose_url, secret_key=secret),
        plugins=[Ledger(log.tables.engine, name, die=DIE in sys.argv[6:])],
        load_entry_points=False,
        allow_anonymous=True,
        settings=GatewaySettings(
            pumps=TAKEOVER, lifecycle=LifecycleSettings(billing=QUICK_BILLING)
        ),
    )
    serve_app(gateway, port_file)


if __name__ == "__main__":
    main()
