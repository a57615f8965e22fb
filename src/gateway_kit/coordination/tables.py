"""The leases table (made by migration 0002): one row per named lease."""

from __future__ import annotations

import sqlalchemy as sa

LEASES = "gateway_kit_leases"

metadata = sa.MetaData()

leases = sa.Table(
    LEASES,
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("holder", sa.Text, nullable=False),
    sa.Column("token", sa.BigInteger, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
)
