"""PostgreSQL appends: hold the ordering lock only until the insert, not through the commit.

Revision 0003's transaction lock was held through the commit's WAL flush, so appends of
different processes flushed one at a time. Now an append takes, in order: a transaction lock
per stream it writes (held to the commit, so the next append to that stream sees its pos), then
one session lock for the whole log, under which it takes its transaction id and its seqs and
inserts, and which it releases before the commit. Transaction ids and seqs are thus assigned in
the same order, and readers deliver only rows of transactions older than every transaction still
running (the snapshot's xmin): an append that commits late can no longer be skipped, and commits
share flushes again.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import pathlib
import runpy

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

APPEND_FUNCTION = """
CREATE OR REPLACE FUNCTION gateway_kit_append(batch json, now_ts double precision)
RETURNS TABLE(out_seq bigint, out_pos integer)
LANGUAGE plpgsql AS $$
DECLARE
    v_count integer := json_array_length(batch);
    v_last bigint;
    v_hash integer;
    v_streams text[];
    v_pos integer[];
    v_runs text[];
    v_types text[];
    v_data text[];
    v_upstream text[];
BEGIN
    -- Stream locks in one global order (by hash), so two appends never wait for each other.
    FOR v_hash IN
        SELECT DISTINCT hashtext(e->>'stream') AS h FROM json_array_elements(batch) e ORDER BY h
    LOOP
        PERFORM pg_advisory_xact_lock({stream_class}, v_hash);
    END LOOP;
    -- Positions need only the stream locks: work them out before the ordering lock, which
    -- every append of the log waits for.
    WITH items AS (
        SELECT t.e, t.n FROM json_array_elements(batch) WITH ORDINALITY AS t(e, n)
    ), heads AS (
        SELECT s.stream, COALESCE((
            SELECT ev.pos FROM gateway_kit_events ev
            WHERE ev.stream = s.stream ORDER BY ev.seq DESC LIMIT 1
        ), 0) AS head
        FROM (SELECT DISTINCT items.e->>'stream' AS stream FROM items) s
    ), rows AS (
        SELECT items.n, items.e->>'stream' AS stream,
               (heads.head + row_number() OVER (
                    PARTITION BY items.e->>'stream' ORDER BY items.n))::integer AS pos,
               items.e->>'run_id' AS run_id, items.e->>'type' AS type,
               items.e->>'data' AS data, items.e->>'upstream_event_id' AS upstream_event_id
        FROM items JOIN heads ON heads.stream = items.e->>'stream'
    )
    SELECT array_agg(rows.stream ORDER BY rows.n), array_agg(rows.pos ORDER BY rows.n),
           array_agg(rows.run_id ORDER BY rows.n), array_agg(rows.type ORDER BY rows.n),
           array_agg(rows.data ORDER BY rows.n), array_agg(rows.upstream_event_id ORDER BY rows.n)
    INTO v_streams, v_pos, v_runs, v_types, v_data, v_upstream
    FROM rows;

    PERFORM pg_advisory_lock({lock_class}, hashtext(current_schema()));
    PERFORM pg_current_xact_id();  -- the transaction id, taken in seq order
    v_last := setval('gateway_kit_events_seq', nextval('gateway_kit_events_seq') + v_count - 1);
    INSERT INTO gateway_kit_events
        (seq, stream, pos, run_id, type, data, upstream_event_id, created_at)
    SELECT v_last - v_count + i, v_streams[i], v_pos[i], v_runs[i], v_types[i], v_data[i],
           v_upstream[i], now_ts
    FROM generate_subscripts(v_streams, 1) AS i;
    PERFORM pg_advisory_unlock({lock_class}, hashtext(current_schema()));
    RETURN QUERY
    SELECT v_last - v_count + i, v_pos[i] FROM generate_subscripts(v_streams, 1) AS i ORDER BY i;
END
$$;
"""

# The same for one event, the common case, without the JSON and the batch bookkeeping.
APPEND_ONE_FUNCTION = """
CREATE OR REPLACE FUNCTION gateway_kit_append_one(
    p_stream text, p_run_id text, p_type text, p_data text, p_upstream text,
    now_ts double precision, OUT out_seq bigint, OUT out_pos integer)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock({stream_class}, hashtext(p_stream));
    out_pos := COALESCE((
        SELECT ev.pos FROM gateway_kit_events ev
        WHERE ev.stream = p_stream ORDER BY ev.seq DESC LIMIT 1
    ), 0) + 1;
    PERFORM pg_advisory_lock({lock_class}, hashtext(current_schema()));
    PERFORM pg_current_xact_id();
    out_seq := nextval('gateway_kit_events_seq');
    INSERT INTO gateway_kit_events
        (seq, stream, pos, run_id, type, data, upstream_event_id, created_at)
    VALUES (out_seq, p_stream, out_pos, p_run_id, p_type, p_data, p_upstream, now_ts);
    PERFORM pg_advisory_unlock({lock_class}, hashtext(current_schema()));
END
$$;
"""


def upgrade() -> None:
    from gateway_kit.log.schema import APPEND_LOCK_CLASS, STREAM_LOCK_CLASS

    if op.get_bind().dialect.name != "postgresql":
        return
    # Existing rows get this migration's own transaction id: settled once it commits.
    op.execute(
        "ALTER TABLE gateway_kit_events ADD COLUMN xid xid8 NOT NULL DEFAULT pg_current_xact_id()"
    )
    for function in (APPEND_FUNCTION, APPEND_ONE_FUNCTION):
        op.execute(function.format(lock_class=APPEND_LOCK_CLASS, stream_class=STREAM_LOCK_CLASS))


def downgrade() -> None:
    from gateway_kit.log.schema import APPEND_LOCK_CLASS

    if op.get_bind().dialect.name != "postgresql":
        return
    script = pathlib.Path(__file__).with_name("0003_append_lock_per_schema.py")
    function = str(runpy.run_path(str(script))["APPEND_FUNCTION"])
    op.execute(function.format(lock_class=APPEND_LOCK_CLASS))
    op.execute(
        "DROP FUNCTION gateway_kit_append_one(text, text, text, text, text, double precision)"
    )
    op.execute("ALTER TABLE gateway_kit_events DROP COLUMN xid")
