"""Table objects for the usage ledger (made by migration 0011)."""

from __future__ import annotations

import sqlalchemy as sa

USAGE_ENTRIES = "gateway_kit_usage_entries"
USAGE_DAYS = "gateway_kit_usage_days"
# The token counts of `gateway_kit.runs.usage.run_usage`, each a column of both tables.
TOKENS = (
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
)

metadata = sa.MetaData()

usage_entries = sa.Table(
    USAGE_ENTRIES,
    metadata,
    sa.Column("idempotency_key", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("stream", sa.Text, nullable=False),
    sa.Column("day", sa.Text, nullable=False),
    *(sa.Column(name, sa.BigInteger, nullable=False) for name in TOKENS),
    sa.Column("cost", sa.Float),
    sa.Column("billed_at", sa.Float, nullable=False),
)

usage_days = sa.Table(
    USAGE_DAYS,
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("day", sa.Text, primary_key=True),
    sa.Column("runs", sa.BigInteger, nullable=False),
    *(sa.Column(name, sa.BigInteger, nullable=False) for name in TOKENS),
    sa.Column("cost", sa.Float, nullable=False),
)
