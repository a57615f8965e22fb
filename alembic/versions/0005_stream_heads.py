"""Stream heads outlive retention: pos is never handed out twice in a stream.

An append's pos was one past the stream's newest event. Once retention had deleted a stream's
newest events (all of them, or all but older ones outside any run), its next appends handed out
positions again, and a client that had seen them could take the new events for ones it already
had. Retention now records each pruned run's head pos per stream in gateway_kit_stream_heads,
and an append's pos is one past the larger of the newest event's and the recorded head (a
primary-key lookup in a table that holds only streams retention has touched). Positions already
handed out twice before this revision cannot be told apart afterwards.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import pathlib
import runpy

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

# Revision 0004's two append functions, with the head lookup falling back to the recorded head.
LOOKUPS = {
    "APPEND_FUNCTION": (
        "SELECT s.stream, COALESCE((",
        "SELECT s.stream, GREATEST((\n"
        "            SELECT h.head FROM gateway_kit_stream_heads h WHERE h.stream = s.stream\n"
        "        ), COALESCE((",
        "WHERE ev.stream = s.stream ORDER BY ev.seq DESC LIMIT 1\n        ), 0) AS head",
        "WHERE ev.stream = s.stream ORDER BY ev.seq DESC LIMIT 1\n        ), 0)) AS head",
    ),
    "APPEND_ONE_FUNCTION": (
        "out_pos := COALESCE((",
        "out_pos := GREATEST((\n"
        "        SELECT h.head FROM gateway_kit_stream_heads h WHERE h.stream = p_stream\n"
        "    ), COALESCE((",
        "WHERE ev.stream = p_stream ORDER BY ev.seq DESC LIMIT 1\n    ), 0) + 1;",
        "WHERE ev.stream = p_stream ORDER BY ev.seq DESC LIMIT 1\n    ), 0)) + 1;",
    ),
}


def revision_0004_functions() -> dict[str, str]:
    script = pathlib.Path(__file__).with_name("0004_append_order_by_xid.py")
    namespace = runpy.run_path(str(script))
    return {name: str(namespace[name]) for name in LOOKUPS}


def upgrade() -> None:
    from gateway_kit.log.schema import APPEND_LOCK_CLASS, STREAM_LOCK_CLASS

    op.create_table(
        "gateway_kit_stream_heads",
        sa.Column("stream", sa.Text, primary_key=True),
        sa.Column("head", sa.Integer, nullable=False),
    )
    if op.get_bind().dialect.name != "postgresql":
        return
    for name, function in revision_0004_functions().items():
        edits = LOOKUPS[name]
        for old, new in zip(edits[::2], edits[1::2], strict=True):
            assert function.count(old) == 1, f"revision 0004's {name} is not as expected"
            function = function.replace(old, new)
        op.execute(function.format(lock_class=APPEND_LOCK_CLASS, stream_class=STREAM_LOCK_CLASS))


def downgrade() -> None:
    from gateway_kit.log.schema import APPEND_LOCK_CLASS, STREAM_LOCK_CLASS

    if op.get_bind().dialect.name == "postgresql":
        for function in revision_0004_functions().values():
            op.execute(
                function.format(lock_class=APPEND_LOCK_CLASS, stream_class=STREAM_LOCK_CLASS)
            )
    op.drop_table("gateway_kit_stream_heads")
