"""Table objects of the bindings (made by migrations 0002, 0012 and 0014)."""

from __future__ import annotations

import sqlalchemy as sa

SESSIONS = "gateway_kit_sessions"
TMUX_BINDINGS = "gateway_kit_execution_bindings"
CLAIMS = "gateway_kit_tmux_claims"

metadata = sa.MetaData()

# Which goose session serves a stream, and from which of the log's events its current goosed
# lifetime began (goose ids of older events are never sent to it again).
sessions = sa.Table(
    SESSIONS,
    metadata,
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("lifetime_start_seq", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# Which tmux session drives a stream: the stream's active runs count as that session's work.
tmux_bindings = sa.Table(
    TMUX_BINDINGS,
    metadata,
    sa.Column("stream", sa.Text, primary_key=True),
    sa.Column("tmux_session", sa.Text, nullable=False),
    sa.Column("bound_at", sa.Float, nullable=False),
)

# The user who holds each tmux session: only their traffic and runs speak for it.
claims = sa.Table(
    CLAIMS,
    metadata,
    sa.Column("tmux_session", sa.Text, primary_key=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("claimed_at", sa.Float, nullable=False),
)
