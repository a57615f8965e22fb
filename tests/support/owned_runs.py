"""Looking at owned runs and their leases from a test."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from gateway_kit import EventLog
from gateway_kit.app_runs.lease_names import lease_name
from gateway_kit.coordination.leases import Lease
from gateway_kit.coordination.tables import leases
from tests.support.waiting import wait_until

STREAM = "conv-owned"


def lease_of(log: EventLog, run_id: str, stream: str = STREAM) -> Any:
    with log.tables.engine.connect() as conn:
        name = lease_name(stream, run_id)
        return conn.execute(sa.select(leases).where(leases.c.name == name)).first()


def lease_count(log: EventLog) -> int:
    with log.tables.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(leases)).scalar_one())


def types(log: EventLog, run_id: str) -> list[str]:
    """The run's event types, once readers see its newest event (PostgreSQL readers keep to
    settled rows, which a fresh commit may not be yet while other transactions run)."""
    newest = log.latest(run_id=run_id)
    if newest is not None:
        wait_until(lambda: log.last_seq() >= newest.seq)
    return [e.type for e in log.read(run_id=run_id)]


def dead_owner(log: EventLog, run_id: str) -> None:
    """An owned run whose process died: one event, and a lease that ran out a second ago."""
    log.append(STREAM, "Message", {"text": "half a reply"}, run_id=run_id)
    assert Lease(log, lease_name(STREAM, run_id), "a process now gone", ttl=-1.0).acquire()
