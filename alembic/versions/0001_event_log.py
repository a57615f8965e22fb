"""The event log: events with a global seq, the log's epoch.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import time
import uuid

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# Appends on PostgreSQL go through this function: the advisory lock serializes seq assignment,
# so commit order equals seq order and a reader "after N" can never miss a later-committing
# smaller seq. Called as a single autocommit statement, the lock is held for one round trip.
APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION gateway_kit_append(batch json, now_ts double precision)
RETURNS TABLE(out_seq bigint, out_pos integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer := json_array_length(batch);
    v_last bigint;
BEGIN
    PERFORM pg_advisory_xact_lock({lock_key});
    v_last := setval('gateway_kit_events_seq', nextval('gateway_kit_events_seq') + v_count - 1);
    RETURN QUERY
    WITH items AS (
        SELECT t.e, t.n FROM json_array_elements(batch) WITH ORDINALITY AS t(e, n)
    ), heads AS (
        SELECT s.stream, COALESCE((
            SELECT ev.pos FROM gateway_kit_events ev
            WHERE ev.stream = s.stream ORDER BY ev.seq DESC LIMIT 1
        ), 0) AS head
        FROM (SELECT DISTINCT items.e->>'stream' AS stream FROM items) s
    ), inserted AS (
        INSERT INTO gateway_kit_events
            (seq, stream, pos, run_id, type, data, upstream_event_id, created_at)
        SELECT v_last - v_count + items.n,
               items.e->>'stream',
               (heads.head + row_number() OVER (
                    PARTITION BY items.e->>'stream' ORDER BY items.n))::integer,
               items.e->>'run_id', items.e->>'type', items.e->>'data',
               items.e->>'upstream_event_id', now_ts
        FROM items JOIN heads ON heads.stream = items.e->>'stream'
        RETURNING gateway_kit_events.seq, gateway_kit_events.pos
    )
    SELECT inserted.seq, inserted.pos FROM inserted ORDER BY inserted.seq;
    PERFORM pg_notify('{channel}', v_last::text);
END
$$;
"""


def upgrade() -> None:
    from gateway_kit.log.schema import ADVISORY_LOCK_KEY, NOTIFY_CHANNEL

    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        # seq is the rowid (fast range scans); AUTOINCREMENT so it is never reused after deletes.
        op.execute(
            """
            CREATE TABLE gateway_kit_events (
                seq INTEGER PRIMARY KEY AUTOINCREMENT,
                stream TEXT NOT NULL,
                pos INTEGER NOT NULL,
                run_id TEXT,
                type TEXT NOT NULL,
                data TEXT NOT NULL,
                upstream_event_id TEXT,
                created_at REAL NOT NULL
            )
            """
        )
    else:
        op.execute("CREATE SEQUENCE gateway_kit_events_seq")
        op.create_table(
            "gateway_kit_events",
            sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
            sa.Column("stream", sa.Text, nullable=False),
            sa.Column("pos", sa.Integer, nullable=False),
            sa.Column("run_id", sa.Text),
            sa.Column("type", sa.Text, nullable=False),
            sa.Column("data", sa.Text, nullable=False),
            sa.Column("upstream_event_id", sa.Text),
            sa.Column("created_at", sa.Float(precision=53), nullable=False),
        )
        op.execute(APPEND_FUNCTION.format(lock_key=ADVISORY_LOCK_KEY, channel=NOTIFY_CHANNEL))
    op.create_index("ix_gateway_kit_events_stream_seq", "gateway_kit_events", ["stream", "seq"])
    op.create_index(
        "ix_gateway_kit_events_run_id",
        "gateway_kit_events",
        ["run_id", "seq"],
        sqlite_where=sa.text("run_id IS NOT NULL"),
        postgresql_where=sa.text("run_id IS NOT NULL"),
    )
    meta = op.create_table(
        "gateway_kit_meta",
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.bulk_insert(
        meta,
        [
            {"key": "epoch", "value": uuid.uuid4().hex},
            {"key": "created_at", "value": repr(time.time())},
        ],
    )


def downgrade() -> None:
    op.drop_table("gateway_kit_meta")
    op.drop_table("gateway_kit_events")
    if op.get_bind().dialect.name != "sqlite":
        op.execute("DROP FUNCTION IF EXISTS gateway_kit_append(json, double precision)")
        op.execute("DROP SEQUENCE IF EXISTS gateway_kit_events_seq")
