"""Runs, the stream → goose session mapping, and leases for session pumps.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_kit_sessions",
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("session_id", sa.Text, nullable=False, unique=True),
        # Events with seq above this belong to the current goosed lifetime: only their goose
        # ids may ever be sent back as Last-Event-ID (goose's ids restart at 1 when it does).
        sa.Column("lifetime_start_seq", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
    )
    op.create_table(
        "gateway_kit_runs",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("upstream_request_id", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False, server_default="1"),
        sa.Column("cancel_requested", sa.Boolean, nullable=False, server_default=sa.false()),
        sa.Column("message", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("finished_at", sa.Float(precision=53)),
    )
    # One active run per conversation, enforced by the database across processes.
    op.create_index(
        "ux_gateway_kit_runs_one_active",
        "gateway_kit_runs",
        ["stream"],
        unique=True,
        sqlite_where=sa.text("status = 'active'"),
        postgresql_where=sa.text("status = 'active'"),
    )
    op.create_index("ix_gateway_kit_runs_session", "gateway_kit_runs", ["session_id", "status"])
    op.create_index("ix_gateway_kit_runs_upstream", "gateway_kit_runs", ["upstream_request_id"])
    op.create_table(
        "gateway_kit_leases",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("holder", sa.Text, nullable=False),
        sa.Column("token", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.Float(precision=53), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateway_kit_leases")
    op.drop_table("gateway_kit_runs")
    op.drop_table("gateway_kit_sessions")
