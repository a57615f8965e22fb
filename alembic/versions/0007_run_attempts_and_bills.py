"""A run's attempts, and the billing outbox written with a run's terminal event.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_kit_run_attempts",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("number", sa.Integer, primary_key=True),
        # Every attempt is its own goose request: goose routes its events by this id.
        sa.Column("upstream_request_id", sa.Text, nullable=False, unique=True),
        sa.Column("session_id", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),  # initial, follow_up or recovery
        # The recovery's kind: each kind at most once per run, whichever process plans it.
        sa.Column("recovery", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("started_at", sa.Float(precision=53), nullable=False),
        sa.UniqueConstraint("run_id", "recovery", name="ux_gateway_kit_attempts_recovery"),
    )
    # Runs made before attempts were recorded had one attempt each, under the run's request id.
    op.execute(
        "INSERT INTO gateway_kit_run_attempts (run_id, number, upstream_request_id, session_id, "
        "kind, started_at) SELECT run_id, 1, upstream_request_id, session_id, 'initial', "
        "created_at FROM gateway_kit_runs"
    )
    op.create_table(
        "gateway_kit_bills",
        sa.Column("run_id", sa.Text, primary_key=True),
        sa.Column("idempotency_key", sa.Text, nullable=False, unique=True),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),  # how the run ended
        sa.Column("usage", sa.Text, nullable=False),  # JSON
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("tries", sa.Integer, nullable=False, server_default="0"),
        sa.Column("claimed_by", sa.Text),
        sa.Column("claimed_until", sa.Float(precision=53)),
        sa.Column("next_try_at", sa.Float(precision=53), nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text),
        sa.Column("delivered_at", sa.Float(precision=53)),
    )
    op.create_index(
        "ix_gateway_kit_bills_undelivered",
        "gateway_kit_bills",
        ["next_try_at"],
        sqlite_where=sa.text("delivered_at IS NULL"),
        postgresql_where=sa.text("delivered_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_table("gateway_kit_bills")
    op.drop_table("gateway_kit_run_attempts")
