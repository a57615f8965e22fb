"""Events of a run by type: a run's end, goose's ends and its usage are found without reading
the whole run.

The run index (`run_id`, `seq`) made "has this run ended?" and "what did the run use?" read
every event of the run, each time: a long run made every legacy poll and every end slower.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_gateway_kit_events_run_type",
        "gateway_kit_events",
        ["run_id", "type", "seq"],
        sqlite_where=sa.text("run_id IS NOT NULL"),
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_gateway_kit_events_run_type", "gateway_kit_events")
