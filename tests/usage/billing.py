"""Helpers of the usage tests: runs that ended, bills that come again, what the ledger holds."""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa

from gateway_kit import EventLog, Gateway
from gateway_kit.runs.bills import idempotency_key
from gateway_kit.runs.model import Run, RunStatus
from gateway_kit.runs.tables import bills
from gateway_kit.usage.tables import usage_days, usage_entries

DAY = 24 * 3600.0


def ended(run_id: str, stream: str, finished_at: float | None = None) -> Run:
    now = time.time()
    return Run(run_id, stream, "session", f"request-{run_id}", RunStatus.FINISHED, 1, False,
               "hi", now, now if finished_at is None else finished_at)  # fmt: skip


def usage(input_tokens: int, output_tokens: int, cost: float | None = None) -> dict[str, Any]:
    """A bill's usage, as `run_usage` makes it."""
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens, "cache_read_tokens": 0,
            "cache_write_tokens": 0, "cost": cost, "provider_calls": 1, "attempts": 1,
            "token_state": None}  # fmt: skip


def deliver(gateway: Gateway, run: Run, used: dict[str, Any]) -> None:
    """Deliver a run's bill to the gateway's `bill_run` plugins, as the outbox does."""
    gateway.plugins.hook.bill_run(run=run, usage=used, idempotency_key=idempotency_key(run.run_id))


def undeliver(log: EventLog, run_id: str) -> None:
    """As if the process that delivered the bill died before marking it delivered."""
    with log.tables.engine.begin() as conn:
        conn.execute(
            bills.update()
            .where(bills.c.run_id == run_id)
            .values(delivered_at=None, claimed_by=None, claimed_until=None, next_try_at=0)
        )


def entries(log: EventLog) -> list[tuple[str, str, str, int, int]]:
    """(key, user, day, input tokens, output tokens) of every entry, by key."""
    with log.tables.engine.connect() as conn:
        rows = conn.execute(sa.select(usage_entries).order_by(usage_entries.c.idempotency_key))
        return [(r.idempotency_key, r.user_id, r.day, r.input_tokens, r.output_tokens)
                for r in rows]  # fmt: skip


def days(log: EventLog) -> list[tuple[str, str, int, int, int, float]]:
    """(user, day, runs, input tokens, output tokens, cost) of every user's day."""
    with log.tables.engine.connect() as conn:
        rows = conn.execute(sa.select(usage_days).order_by(usage_days.c.user_id, usage_days.c.day))
        return [(r.user_id, r.day, r.runs, r.input_tokens, r.output_tokens, r.cost)
                for r in rows]  # fmt: skip
