"""`EndWriter`: a run's end, written once.

The run's `Finish` or `Error` (with the `guard_failed` event before it, when its guards gave up)
is appended in one transaction with the run's status and its bill, at most once per run
whatever several processes do; the bill is then delivered through the billing outbox
(`billing.py`), by this process first.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..log import Event, EventLog
from ..log.transaction import Transaction
from .billing import BillingOutbox
from .ending import End
from .model import Run
from .reading import read_all
from .store import write_ending
from .usage import COUNTED, run_usage
from .vetoes import guard_failed_before


class EndWriter:
    """:param log: where the run's end goes.
    :param billing: the outbox that delivers the run's bill.
    """

    def __init__(self, log: EventLog, billing: BillingOutbox) -> None:
        self.log = log
        self.billing = billing

    async def write(self, run: Run, end: End) -> Event | None:
        """Append the run's terminal event as `end` says, with its status and bill, unless the
        run has ended; the terminal event written, or None."""
        ended = await asyncio.to_thread(self._write, run, end)
        if ended is not None:
            self.billing.deliver_soon(run.run_id)
        return ended

    def _write(self, run: Run, end: End) -> Event | None:
        usage = run_usage(read_all(self.log, run.run_id, COUNTED), run.attempt)
        body = {"type": end.type, **end.data, "status": end.status.value, "attempts": run.attempt}
        body["usage"] = usage
        # This process delivers the bill at once; a scan elsewhere takes over only if it has
        # not been delivered by the time a claim of this process would have run out.
        others_from = time.time() + self.billing.settings.claim_ttl

        def also(transaction: Transaction, written: list[Event]) -> None:
            write_ending(transaction, run, end.status, usage, others_from=others_from)

        before: list[dict[str, Any]] = guard_failed_before(run.run_id, run.stream, end.guard_failed)
        return self.log.end_run(
            run.stream, end.type, body, run_id=run.run_id, before=before, also=also
        )
