"""Who started each run through the gateway: a user's active runs are counted by it.

Runs recorded before it, and runs started from Python without a user, have none (they count for
nobody). An index over the active runs of each starter makes the count a few rows.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-08
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

RUNS = "gateway_kit_runs"
INDEX = "ix_gateway_kit_runs_active_by_starter"


def upgrade() -> None:
    op.add_column(RUNS, sa.Column("started_by", sa.Text))
    active = sa.text("status = 'active'")
    op.create_index(INDEX, RUNS, ["started_by"], sqlite_where=active, postgresql_where=active)


def downgrade() -> None:
    op.drop_index(INDEX, RUNS)
    # Plain SQL on both backends (SQLite has DROP COLUMN since 3.35): a batch copy of the table
    # would have to rebuild its partial one-active-run index by hand.
    op.execute(f"ALTER TABLE {RUNS} DROP COLUMN started_by")
