"""The usage ledger: what each run cost, per user and day.

One entry per bill, keyed by the bill's idempotency key, so that a bill delivered again (by
this process or another) finds its entry and adds nothing; and each user's totals per UTC day,
added to in the transaction that writes the entry.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

TOKENS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)


def upgrade() -> None:
    op.create_table(
        "gateway_kit_usage_entries",
        sa.Column("idempotency_key", sa.Text, primary_key=True),
        sa.Column("run_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("stream", sa.Text, nullable=False),
        sa.Column("day", sa.Text, nullable=False),  # YYYY-MM-DD, UTC, the day the run ended
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in TOKENS),
        sa.Column("cost", sa.Float(precision=53)),  # None where goose did not know it
        sa.Column("billed_at", sa.Float(precision=53), nullable=False),
    )
    op.create_index(
        "ix_gateway_kit_usage_entries_user_day", "gateway_kit_usage_entries", ["user_id", "day"]
    )
    op.create_table(
        "gateway_kit_usage_days",
        sa.Column("user_id", sa.Text, primary_key=True),
        sa.Column("day", sa.Text, primary_key=True),
        sa.Column("runs", sa.BigInteger, nullable=False),
        *(sa.Column(name, sa.BigInteger, nullable=False) for name in TOKENS),
        sa.Column("cost", sa.Float(precision=53), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateway_kit_usage_days")
    op.drop_index("ix_gateway_kit_usage_entries_user_day", "gateway_kit_usage_entries")
    op.drop_table("gateway_kit_usage_entries")
