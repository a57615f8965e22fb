"""Durable approvals: one row per confirmation goose waits for, and an append-only audit of
everything done to it (requested, claimed, decided or refused, sent, delivered, expired,
voided), with who did it.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "gateway_kit_approvals",
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
        sa.Column("requested_at", SECONDS, nullable=False),
        sa.Column("expires_at", SECONDS, nullable=False),
        sa.Column("claimed_by", sa.Text),
        sa.Column("claimed_at", SECONDS),
        sa.Column("decision", sa.Text),
        sa.Column("decided_by", sa.Text),
        sa.Column("decided_at", SECONDS),
        sa.Column("reason", sa.Text),
        sa.Column("response", sa.Text),
        sa.Column("closed_reason", sa.Text),
        sa.Column("action", sa.Text),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("attempted_at", SECONDS),
        sa.Column("delivered_at", SECONDS),
        sa.Column("version", sa.Integer, nullable=False, server_default="0"),
        sa.UniqueConstraint(
            "session_id", "lifetime", "request_id", name="uq_gateway_kit_approvals_invocation"
        ),
    )
    op.create_index(
        "ix_gateway_kit_approvals_stream", "gateway_kit_approvals", ["stream", "requested_at"]
    )
    # What the sweep reads every second, each with a partial index: a few rows, however many
    # approvals are done with.
    pending = sa.text("status = 'pending'")
    op.create_index(
        "ix_gateway_kit_approvals_pending",
        "gateway_kit_approvals",
        ["expires_at"],
        sqlite_where=pending,
        postgresql_where=pending,
    )
    owed = sa.text(
        "delivered_at IS NULL AND action IS NOT NULL "
        "AND status IN ('approved', 'rejected', 'expired')"
    )
    op.create_index(
        "ix_gateway_kit_approvals_owed",
        "gateway_kit_approvals",
        ["approval_id"],
        sqlite_where=owed,
        postgresql_where=owed,
    )
    op.create_table(
        "gateway_kit_approval_audit",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("approval_id", sa.Text, nullable=False),
        sa.Column("at", SECONDS, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("principal", sa.Text),
        sa.Column("detail", sa.Text, nullable=False),
    )
    op.create_index(
        "ix_gateway_kit_approval_audit_approval",
        "gateway_kit_approval_audit",
        ["approval_id", "id"],
    )


def downgrade() -> None:
    op.drop_table("gateway_kit_approval_audit")
    op.drop_table("gateway_kit_approvals")
