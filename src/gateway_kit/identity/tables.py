"""Table objects for the identity rows: API tokens, stream owners, socket tickets and ended
logins (made by migrations 0008 and 0010)."""

from __future__ import annotations

import sqlalchemy as sa

API_TOKENS = "gateway_kit_api_tokens"
STREAM_OWNERS = "gateway_kit_stream_owners"
SOCKET_TICKETS = "gateway_kit_socket_tickets"
REVOKED_LOGINS = "gateway_kit_revoked_logins"

metadata = sa.MetaData()

api_tokens = sa.Table(
    API_TOKENS,
    metadata,
    sa.Column("token_id", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("secret_hash", sa.Text, nullable=False),
    sa.Column("scopes", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("revoked_at", sa.Float),
    sa.Column("change", sa.BigInteger),  # see `changes.next_change`
)

stream_owners = sa.Table(
    STREAM_OWNERS,
    metadata,
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("declared_at", sa.Float, nullable=False),
)

socket_tickets = sa.Table(
    SOCKET_TICKETS,
    metadata,
    sa.Column("ticket_hash", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("method", sa.Text, nullable=False),
    sa.Column("credential_id", sa.Text),
    sa.Column("scopes", sa.Text, nullable=False),
    sa.Column("origin", sa.Text),
    sa.Column("issued_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("used_at", sa.Float),
)

revoked_logins = sa.Table(
    REVOKED_LOGINS,
    metadata,
    sa.Column("credential_id", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("revoked_at", sa.Float, nullable=False),
    sa.Column("change", sa.BigInteger),
)
