"""Table objects of the approvals (made by migration 0013)."""

from __future__ import annotations

import sqlalchemy as sa

APPROVALS = "gateway_kit_approvals"
AUDIT = "gateway_kit_approval_audit"

metadata = sa.MetaData()

# What the sweep reads every second, each with a partial index of its own (migration 0013): a
# few rows, however many approvals are done with. Written out whole, as the indexes are, so
# that SQLite sees the query's terms are the index's (a bound parameter it cannot compare).
PENDING = "status = 'pending'"
OWED = (
    "delivered_at IS NULL AND action IS NOT NULL AND status IN ('approved', 'rejected', 'expired')"
)

# One row per confirmation goose waits for, bound to that invocation: the goose session, its
# lifetime (a goosed restart begins a new one) and goose's id of the request.
approvals = sa.Table(
    APPROVALS,
    metadata,
    sa.Column("approval_id", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("stream", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("lifetime", sa.BigInteger, nullable=False),
    sa.Column("request_id", sa.Text, nullable=False),
    sa.Column("tool_name", sa.Text),
    sa.Column("arguments", sa.Text, nullable=False),
    sa.Column("args_hash", sa.Text, nullable=False),
    sa.Column("prompt", sa.Text),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("requested_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("claimed_by", sa.Text),
    sa.Column("claimed_at", sa.Float),
    sa.Column("decision", sa.Text),
    sa.Column("decided_by", sa.Text),
    sa.Column("decided_at", sa.Float),
    sa.Column("reason", sa.Text),
    sa.Column("response", sa.Text),
    sa.Column("closed_reason", sa.Text),
    sa.Column("action", sa.Text),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("attempted_at", sa.Float),
    sa.Column("delivered_at", sa.Float),
    # Every change checks the version it read and writes the next: one of two racing
    # changes wins, the other reads the row again.
    sa.Column("version", sa.Integer, nullable=False, server_default="0"),
    sa.UniqueConstraint("session_id", "lifetime", "request_id"),
)

# Append-only: every claim, decision (the refused ones too), sending, delivery, expiry and
# voiding, with the principal who did it (None for the gateway itself).
audit = sa.Table(
    AUDIT,
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("approval_id", sa.Text, nullable=False),
    sa.Column("at", sa.Float, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("principal", sa.Text),
    sa.Column("detail", sa.Text, nullable=False),
)
