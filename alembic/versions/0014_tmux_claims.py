"""Who holds each tmux session, and repeated heartbeat decisions folded into one row.

A tmux session is held by one user, the one whose runs and requests may speak for it: only
that user's traffic changes the session's execution state, and only that user (or an
operator) reads its heartbeat. A decision equal to the one before it (same decision, reason,
state and decider) updates that row, counting repeats, instead of adding one.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

SECONDS = sa.Float(precision=53)
DECISIONS = "gateway_kit_heartbeat_decisions"


def upgrade() -> None:
    op.create_table(
        "gateway_kit_tmux_claims",
        sa.Column("tmux_session", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("claimed_at", SECONDS, nullable=False),
    )
    op.create_index("ix_gateway_kit_tmux_claims_user", "gateway_kit_tmux_claims", ["user_id"])
    with op.batch_alter_table(DECISIONS) as batch:
        batch.add_column(sa.Column("since", SECONDS))
        batch.add_column(sa.Column("repeats", sa.Integer, nullable=False, server_default="1"))
    op.execute(f"UPDATE {DECISIONS} SET since = decided_at")


def downgrade() -> None:
    with op.batch_alter_table(DECISIONS) as batch:
        batch.drop_column("repeats")
        batch.drop_column("since")
    op.drop_index("ix_gateway_kit_tmux_claims_user", "gateway_kit_tmux_claims")
    op.drop_table("gateway_kit_tmux_claims")
