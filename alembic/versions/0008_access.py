"""Access rows: API and host-login tokens, stream owners, socket tickets, presence, ended logins.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "gateway_kit_api_tokens",
        sa.Column("token_id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),  # api or host
        sa.Column("secret_hash", sa.Text, nullable=False),  # SHA-256 of the secret, hex
        sa.Column("scopes", sa.Text, nullable=False),  # JSON list
        sa.Column("created_at", sa.Float(precision=53), nullable=False),
        sa.Column("revoked_at", sa.Float(precision=53)),
    )
    op.create_index("ix_gateway_kit_api_tokens_user", "gateway_kit_api_tokens", ["user_id"])
    op.create_table(
        "gateway_kit_stream_owners",
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("declared_at", sa.Float(precision=53), nullable=False),
    )
    op.create_table(
        "gateway_kit_socket_tickets",
        sa.Column("ticket_hash", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("method", sa.Text, nullable=False),
        sa.Column("credential_id", sa.Text),
        sa.Column("scopes", sa.Text, nullable=False),
        sa.Column("origin", sa.Text),  # the browser page that asked, bound for the connect
        sa.Column("issued_at", sa.Float(precision=53), nullable=False),
        sa.Column("expires_at", sa.Float(precision=53), nullable=False),
        sa.Column("used_at", sa.Float(precision=53)),
    )
    # The per-user cap and the per-credential rate read the newest tickets of one holder.
    op.create_index(
        "ix_gateway_kit_socket_tickets_user", "gateway_kit_socket_tickets", ["user_id", "issued_at"]
    )
    op.create_index(
        "ix_gateway_kit_socket_tickets_credential",
        "gateway_kit_socket_tickets",
        ["credential_id", "issued_at"],
    )
    # Presence: who watches which stream, from every process (a row per Socket.IO connection
    # and per subscription; a process's rows count while its lease lives).
    op.create_table(
        "gateway_kit_socket_connections",
        sa.Column("connection_id", sa.Text, primary_key=True),
        sa.Column("process_id", sa.Text, nullable=False),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("method", sa.Text, nullable=False),
        sa.Column("credential_id", sa.Text),
        sa.Column("connected_at", sa.Float(precision=53), nullable=False),
    )
    op.create_index(
        "ix_gateway_kit_socket_connections_process",
        "gateway_kit_socket_connections",
        ["process_id"],
    )
    op.create_table(
        "gateway_kit_socket_subscriptions",
        sa.Column("connection_id", sa.Text, primary_key=True),
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("subscribed_at", sa.Float(precision=53), nullable=False),
    )
    op.create_index(
        "ix_gateway_kit_socket_subscriptions_stream",
        "gateway_kit_socket_subscriptions",
        ["stream"],
    )
    op.create_table(
        "gateway_kit_revoked_logins",
        sa.Column("credential_id", sa.Text, primary_key=True),
        sa.Column("user_id", sa.Text, nullable=False),
        sa.Column("revoked_at", sa.Float(precision=53), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("gateway_kit_revoked_logins")
    op.drop_table("gateway_kit_socket_subscriptions")
    op.drop_table("gateway_kit_socket_connections")
    op.drop_table("gateway_kit_socket_tickets")
    op.drop_table("gateway_kit_stream_owners")
    op.drop_table("gateway_kit_api_tokens")
