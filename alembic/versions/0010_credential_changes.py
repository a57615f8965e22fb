"""Credential changes in commit order: each process keeps tokens and ended logins in memory
and reads only the rows changed since its last read.

`change` is given under a lock (PostgreSQL: the table in SHARE ROW EXCLUSIVE mode; SQLite:
its write lock), one more than the table's largest, so a reader that has seen change N has
seen every change below it. Rows written before this revision have none; a process reads
them with the whole table when it starts.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

TABLES = ("gateway_kit_api_tokens", "gateway_kit_revoked_logins")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("change", sa.BigInteger))
        op.create_index(f"ix_{table}_change", table, ["change"])
    op.create_index(
        "ix_gateway_kit_revoked_logins_revoked_at", "gateway_kit_revoked_logins", ["revoked_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_gateway_kit_revoked_logins_revoked_at", "gateway_kit_revoked_logins")
    for table in TABLES:
        op.drop_index(f"ix_{table}_change", table)
        with op.batch_alter_table(table) as batch:
            batch.drop_column("change")
