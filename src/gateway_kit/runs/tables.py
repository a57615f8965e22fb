"""Table objects for the rows beside the log (made by migration 0002)."""

from __future__ import annotations

import sqlalchemy as sa

SESSIONS = "gateway_kit_sessions"
RUNS = "gateway_kit_runs"
LEASES = "gateway_kit_leases"

metadata = sa.MetaData()

sessions = sa.Table(
    SESSIONS,
    metadata,
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("lifetime_start_seq", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

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
)

leases = sa.Table(
    LEASES,
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("token", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)
