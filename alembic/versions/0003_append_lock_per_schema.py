"""PostgreSQL appends: a lock per schema, and no NOTIFY inside the append.

The NOTIFY took a database-wide lock that PostgreSQL holds through the commit's WAL flush, so
appends of different processes could not share a flush; the wake-up is now sent after the
commit, coalesced, from the appending process. The advisory lock is keyed by the schema, so
logs in different schemas of one database no longer wait for each other.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import pathlib
import runpy

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION gateway_kit_append(batch json, now_ts double precision)
RETURNS TABLE(out_seq bigint, out_pos integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer := json_array_length(batch);
    v_last bigint;
BEGIN
    PERFORM pg_advisory_xact_lock({lock_class}, hashtext(current_schema()));
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
END
$$;
"""


def upgrade() -> None:
    from gateway_kit.log.schema import APPEND_LOCK_CLASS

    if op.get_bind().dialect.name == "postgresql":
        op.execute(APPEND_FUNCTION.format(lock_class=APPEND_LOCK_CLASS))


def downgrade() -> None:
    from gateway_kit.log.schema import ADVISORY_LOCK_KEY, NOTIFY_CHANNEL

    if op.get_bind().dialect.name == "postgresql":
        op.execute(_first_function().format(lock_key=ADVISORY_LOCK_KEY, channel=NOTIFY_CHANNEL))


def _first_function() -> str:
    """The append function of revision 0001, read from its script beside this one."""
    script = pathlib.Path(__file__).with_name("0001_event_log.py")
    return str(runpy.run_path(str(script))["APPEND_FUNCTION"])
