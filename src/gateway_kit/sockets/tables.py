"""Table objects for presence: this deployment's Socket.IO connections and what each watches
(made by migration 0008)."""

from __future__ import annotations

import sqlalchemy as sa

SOCKET_CONNECTIONS = "gateway_kit_socket_connections"
SOCKET_SUBSCRIPTIONS = "gateway_kit_socket_subscriptions"

metadata = sa.MetaData()

socket_connections = sa.Table(
    SOCKET_CONNECTIONS,
    metadata,
    sa.Column("connection_id", sa.Text, primary_key=True),
    sa.Column("process_id", sa.Text, nullable=False),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("method", sa.Text, nullable=False),
    sa.Column("credential_id", sa.Text),
    sa.Column("connected_at", sa.Float, nullable=False),
)

socket_subscriptions = sa.Table(
    SOCKET_SUBSCRIPTIONS,
    metadata,
    sa.Column("connection_id", sa.Text, primary_key=True),
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("subscribed_at", sa.Float, nullable=False),
)
