"""The bills of ended runs, as rows: written with a run's terminal event (`write_ending` of
`store.py`), then claimed and delivered by the billing outbox (`billing.py`)."""

from __future__ import annotations

import json
import time
from typing import Any

import sqlalchemy as sa

from .model import Bill
from .rows import Rows
from .tables import bills

BILL = bills.insert().values(
    run_id=sa.bindparam("bill_run_id"),
    idempotency_key=sa.bindparam("bill_key"),
    stream=sa.bindparam("bill_stream"),
    status=sa.bindparam("bill_status"),
    usage=sa.bindparam("bill_usage"),
    created_at=sa.bindparam("bill_created_at"),
    tries=0,
    next_try_at=sa.bindparam("bill_next_try_at"),
)


BILL_OF_RUN = sa.select(bills).where(bills.c.run_id == sa.bindparam("run_id"))
BILLS = sa.select(bills).order_by(bills.c.created_at)
UNDELIVERED_BILLS = BILLS.where(bills.c.delivered_at.is_(None))
MINE = sa.and_(
    bills.c.run_id == sa.bindparam("run_id"), bills.c.claimed_by == sa.bindparam("holder")
)
CLAIM = (
    bills.update()
    .where(bills.c.run_id == sa.bindparam("run_id"))
    .where(bills.c.delivered_at.is_(None))
    .where(sa.or_(bills.c.claimed_until.is_(None), bills.c.claimed_until < sa.bindparam("now")))
    .values(
        claimed_by=sa.bindparam("holder"),
        claimed_until=sa.bindparam("until"),
        tries=bills.c.tries + 1,
    )
)
DELIVERED = (
    bills.update()
    .where(MINE)
    .values(delivered_at=sa.bindparam("now"), claimed_until=None, last_error=None)
)
FAILED_KEEPING_CLAIM = (
    bills.update()
    .where(MINE)
    .values(next_try_at=sa.bindparam("retry_at"), last_error=sa.bindparam("error"))
)
FAILED = FAILED_KEEPING_CLAIM.values(claimed_until=None)
# Undelivered bills whose next try is due and that nobody holds a claim on: asked for by the
# billing outbox every few seconds, so built once.
DUE_BILLS = (
    sa.select(bills.c.run_id)
    .where(bills.c.delivered_at.is_(None))
    .where(bills.c.next_try_at <= sa.bindparam("now"))
    .where(sa.or_(bills.c.claimed_until.is_(None), bills.c.claimed_until < sa.bindparam("now")))
    .order_by(bills.c.next_try_at)
    .limit(sa.bindparam("limit"))
)


def idempotency_key(run_id: str) -> str:
    """The key every delivery of a run's bill carries: one run, one key."""
    return f"gateway-kit-run:{run_id}"


def _bill(row: Any) -> Bill:
    return Bill(
        run_id=row.run_id,
        idempotency_key=row.idempotency_key,
        stream=row.stream,
        status=row.status,
        usage=json.loads(row.usage),
        created_at=row.created_at,
        tries=row.tries,
        delivered_at=row.delivered_at,
        last_error=row.last_error,
    )


class Bills(Rows):
    """The bills of the run store."""

    def bill(self, run_id: str) -> Bill | None:
        row = self._first(BILL_OF_RUN, {"run_id": run_id})
        return None if row is None else _bill(row)

    def bills(self, *, undelivered: bool = False) -> list[Bill]:
        return [_bill(row) for row in self._rows(UNDELIVERED_BILLS if undelivered else BILLS)]

    def due_bills(self, now: float, limit: int = 100) -> list[str]:
        """Undelivered bills whose next try is due and that nobody holds a claim on."""
        return [row.run_id for row in self._rows(DUE_BILLS, {"now": now, "limit": limit})]

    def claim_bill(self, run_id: str, holder: str, ttl: float) -> Bill | None:
        """Take the delivery of a bill for `ttl` seconds; None if delivered or claimed."""
        now = time.time()
        params = {"run_id": run_id, "holder": holder, "now": now, "until": now + ttl}
        result = self.tables.write(CLAIM, params)
        return self.bill(run_id) if result.rowcount else None

    def bill_delivered(self, run_id: str, holder: str) -> None:
        self.tables.write(DELIVERED, {"run_id": run_id, "holder": holder, "now": time.time()})

    def bill_failed(
        self, run_id: str, holder: str, error: str, retry_at: float, keep_claim: bool = False
    ) -> None:
        """Record a failed delivery; the next try after `retry_at` (and, with `keep_claim`,
        not before this holder's claim runs out)."""
        params = {"run_id": run_id, "holder": holder, "retry_at": retry_at, "error": error}
        self.tables.write(FAILED_KEEPING_CLAIM if keep_claim else FAILED, params)
