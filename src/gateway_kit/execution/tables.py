"""Table objects of the execution state (made by migration 0012)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

REQUESTS = "gateway_kit_execution_requests"
PROCESSES = "gateway_kit_execution_processes"
DECISIONS = "gateway_kit_heartbeat_decisions"

metadata = sa.MetaData()

# One row per observed request of a tmux session, written by the process that serves it.
requests = sa.Table(
    REQUESTS,
    metadata,
    sa.Column("request_id", sa.Text, primary_key=True),
    sa.Column("tmux_session", sa.Text, nullable=False),
    sa.Column("process", sa.Text, nullable=False),
    sa.Column("method", sa.Text, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("started_at", sa.Float, nullable=False),
    sa.Column("sse_opened_at", sa.Float),
    sa.Column("ended_at", sa.Float),
    sa.Column("outcome", sa.Text),
    sa.Column("finish_reason", sa.Text),
    sa.Column("terminal_at", sa.Float),
)

# Each observing process, renewed while it lives: the open requests of a process that stopped
# renewing ended with it.
processes = sa.Table(
    PROCESSES,
    metadata,
    sa.Column("process", sa.Text, primary_key=True),
    sa.Column("seen_at", sa.Float, nullable=False),
)

decisions = sa.Table(
    DECISIONS,
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("tmux_session", sa.Text, nullable=False),
    sa.Column("decided_at", sa.Float, nullable=False),
    sa.Column("decision", sa.Text, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("state", sa.Text, nullable=False),
    sa.Column("decided_by", sa.Text, nullable=False),
    sa.Column("detail", sa.Text, nullable=False),
    sa.Column("evidence", sa.Text, nullable=False),
    # A decision equal to the one before it updates that row: `since` is when it was first
    # made, `decided_at` the latest time, `repeats` how many times in all.
    sa.Column("since", sa.Float),
    sa.Column("repeats", sa.Integer, nullable=False, server_default="1"),
)


def nth_newest_of_session(column: sa.Column[Any], n: int) -> Any:
    """`column` of a session's (``:tmux_session``) `n`-th newest row by it, as a scalar
    subquery: NULL while the session has fewer rows. The rows older than it are the ones to
    let go of, when a session keeps its newest `n`."""
    table = column.table
    return (
        sa.select(column)
        .where(table.c.tmux_session == sa.bindparam("tmux_session"))
        .order_by(column.desc())
        .offset(n - 1)
        .limit(1)
        .scalar_subquery()
    )
