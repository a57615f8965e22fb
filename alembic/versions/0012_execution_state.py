"""Execution state per tmux session: observed requests, observing processes, the streams bound
to tmux sessions, and every heartbeat decision with its reason.

A request row is written by the process serving it, as the request goes (started, stream
opened, ended); the rows of one tmux session fold into its state. A process renews its row
while it lives, so that its open requests end with it.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

SECONDS = sa.Float(precision=53)


def upgrade() -> None:
    op.create_table(
        "gateway_kit_execution_requests",
        sa.Column("request_id", sa.Text, primary_key=True),
        sa.Column("tmux_session", sa.Text, nullable=False),
        sa.Column("process", sa.Text, nullable=False),
        sa.Column("method", sa.Text, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("started_at", SECONDS, nullable=False),
        sa.Column("sse_opened_at", SECONDS),
        sa.Column("ended_at", SECONDS),
        sa.Column("outcome", sa.Text),
        sa.Column("finish_reason", sa.Text),
        sa.Column("terminal_at", SECONDS),
    )
    op.create_index(
        "ix_gateway_kit_execution_requests_session",
        "gateway_kit_execution_requests",
        ["tmux_session", "started_at"],
    )
    op.create_table(
        "gateway_kit_execution_processes",
        sa.Column("process", sa.Text, primary_key=True),
        sa.Column("seen_at", SECONDS, nullable=False),
    )
    op.create_table(
        "gateway_kit_execution_bindings",
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("tmux_session", sa.Text, nullable=False),
        sa.Column("bound_at", SECONDS, nullable=False),
    )
    op.create_index(
        "ix_gateway_kit_execution_bindings_session",
        "gateway_kit_execution_bindings",
        ["tmux_session"],
    )
    op.create_table(
        "gateway_kit_heartbeat_decisions",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("tmux_session", sa.Text, nullable=False),
        sa.Column("decided_at", SECONDS, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("decided_by", sa.Text, nullable=False),
        sa.Column("detail", sa.Text, nullable=False),
        sa.Column("evidence", sa.Text, nullable=False),
    )
    op.create_index(
        "ix_gateway_kit_heartbeat_decisions_session",
        "gateway_kit_heartbeat_decisions",
        ["tmux_session", "id"],
    )


def downgrade() -> None:
    op.drop_index("ix_gateway_kit_heartbeat_decisions_session", "gateway_kit_heartbeat_decisions")
    op.drop_table("gateway_kit_heartbeat_decisions")
    op.drop_index("ix_gateway_kit_execution_bindings_session", "gateway_kit_execution_bindings")
    op.drop_table("gateway_kit_execution_bindings")
    op.drop_table("gateway_kit_execution_processes")
    op.drop_index("ix_gateway_kit_execution_requests_session", "gateway_kit_execution_requests")
    op.drop_table("gateway_kit_execution_requests")
