"""Which stream a run belongs to, for ``gateway-kit tail --until-finish RUN_ID``, or None for a
run nothing knows of (a typo, a run of another log): waiting for its end would wait for ever.

A run about to start is known before its first event: the gateway records its runs before
anything is appended (`RunStore`), and an app's `owned_run` holds its lease from the start of
its block. Those are looked at before the log, so that a run that starts, writes and ends
between the looks is still found.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..app_runs.lease_names import lease_name
from ..coordination.tables import leases
from ..log import EventLog
from ..runs.store import RunStore

LEASE = sa.select(leases.c.name).where(leases.c.name == sa.bindparam("name"))


def stream_of_run(log: EventLog, stream: str, run_id: str) -> str | None:
    """The stream of run `run_id`: recorded by the gateway, held open by an app writing it to
    `stream`, or written to the log; None when nothing knows of it."""
    recorded = RunStore(log).get(run_id)
    if recorded is not None:
        return recorded.stream
    if log.tables.select(LEASE, {"name": lease_name(stream, run_id)}):
        return stream
    found = log.latest(run_id=run_id)
    return None if found is None else found.stream
