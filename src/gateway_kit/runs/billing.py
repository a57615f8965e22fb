"""The billing outbox: a run's bill is a row written with its terminal event, delivered after.

Delivery calls `bill_run(run, usage, idempotency_key)` and marks the row delivered. A delivery
that raises, or a process that dies before marking it, leaves the row undelivered: any gateway
process on the database delivers it again later, with the same key. A delivery is claimed for
a while first, so two processes do not deliver one bill at the same time; a claim that runs out
(its process died) is taken over. So a consumer that honours the key bills each run once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass

from ..coordination.periodic import Periodic
from ..coordination.tasks import TaskSet
from ..hooks import Plugins
from ..hooks.policy import HookFailed
from .store import RunStore

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class BillingSettings:
    claim_ttl: float = 60.0  # how long one delivery may take before another process retries
    retry_delay: float = 1.0  # after the first failed delivery; doubles, up to max_retry_delay
    max_retry_delay: float = 300.0
    scan_interval: float = 5.0  # how often undelivered bills are looked for
    timeout: float = 30.0  # a bill_run call slower than this counts as failed


class BillingOutbox:
    def __init__(
        self, store: RunStore, plugins: Plugins, settings: BillingSettings | None = None
    ) -> None:
        self.store = store
        self.plugins = plugins
        self.settings = settings or BillingSettings()
        self.holder = uuid.uuid4().hex
        self._deliveries = TaskSet()
        self._scanner = Periodic(self.deliver_due, self.settings.scan_interval, "gateway-kit-bills")

    def deliver_soon(self, run_id: str) -> None:
        """Deliver the run's bill now, in the background (it was just written)."""
        task = self._deliveries.start(self.deliver(run_id), name=f"gateway-kit-bill-{run_id}")
        task.add_done_callback(self._delivery_done)

    def _delivery_done(self, task: asyncio.Task[bool]) -> None:
        if not task.cancelled() and task.exception() is not None:
            # The bill stays undelivered: a scan delivers it once this claim runs out.
            logger.error("delivering a bill failed", exc_info=task.exception())

    async def deliver(self, run_id: str) -> bool:
        """Deliver one bill unless it is delivered or claimed; True when this call delivered it."""
        settings = self.settings
        bill = await asyncio.to_thread(
            self.store.claim_bill, run_id, self.holder, settings.claim_ttl
        )
        if bill is None:
            return False
        run = await asyncio.to_thread(self.store.get, run_id)
        try:
            if run is None:
                raise LookupError(f"no run {run_id!r} for its bill")
            await self.plugins.bill_run(
                run, bill.usage, bill.idempotency_key, timeout=settings.timeout
            )
        except (HookFailed, TimeoutError, LookupError) as exc:
            delay = min(settings.retry_delay * 2 ** (bill.tries - 1), settings.max_retry_delay)
            reason = str(exc) or "bill_run did not answer in time"
            logger.warning("billing run %s failed (try %d): %s", run_id, bill.tries, reason)
            # A call that timed out may still be delivering: the claim stands until it runs
            # out, so that no second delivery runs beside it.
            keep_claim = isinstance(exc, TimeoutError)
            await asyncio.to_thread(
                self.store.bill_failed, run_id, self.holder, reason, time.time() + delay, keep_claim
            )
            return False
        await asyncio.to_thread(self.store.bill_delivered, run_id, self.holder)
        return True

    async def deliver_due(self) -> int:
        """Deliver every bill that is due; how many this call delivered."""
        due = await asyncio.to_thread(self.store.due_bills, time.time())
        delivered = 0
        for run_id in due:
            try:
                delivered += await self.deliver(run_id)
            except Exception:  # one bill that cannot be delivered holds up no other
                logger.exception("delivering the bill of run %s failed", run_id)
        return delivered

    async def start(self) -> None:
        self._scanner.start()

    async def wait_idle(self) -> None:
        await self._deliveries.wait_idle()

    async def stop(self) -> None:
        await self._scanner.stop()
        await self._deliveries.stop()
