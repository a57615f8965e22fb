"""Table objects of runs, their attempts and their bills (made by migrations 0002, 0007 and 0015;
the stream → goose session bindings are `gateway_kit.bindings.tables`)."""

from __future__ import annotations

import sqlalchemy as sa

RUNS = "gateway_kit_runs"
ATTEMPTS = "gateway_kit_run_attempts"
BILLS = "gateway_kit_bills"

metadata = sa.MetaData()

runs = sa.Table(
    RUNS,
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("stream", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("upstream_request_id", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("cancel_requested", sa.Boolean, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float),
    sa.Column("started_by", sa.Text),  # the user who started it (migration 0015)
)

attempts = sa.Table(
    ATTEMPTS,
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("number", sa.Integer, primary_key=True),
    sa.Column("upstream_request_id", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("recovery", sa.Text),
    sa.Column("reason", sa.Text),
    sa.Column("started_at", sa.Float, nullable=False),
)

bills = sa.Table(
    BILLS,
    metadata,
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("idempotency_key", sa.Text, nullable=False),
    sa.Column("stream", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("usage", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("tries", sa.Integer, nullable=False),
    sa.Column("claimed_by", sa.Text),
    sa.Column("claimed_until", sa.Float),
    sa.Column("next_try_at", sa.Float, nullable=False),
    sa.Column("last_error", sa.Text),
    sa.Column("delivered_at", sa.Float),
)
