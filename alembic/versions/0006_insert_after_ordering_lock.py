"""PostgreSQL appends: the ordering lock covers only the transaction id and the seqs.

Since revision 0004 an append takes its transaction id and its seqs under one session lock for
the whole log, so that both are assigned in the same order and readers that keep to settled
rows (those of transactions older than every running one) cannot skip an event. The insert
was done under that lock too, but nothing needs it there: a row is delivered only once its
transaction is older than every running one, and then every transaction with a smaller seq,
holding a smaller transaction id, has ended as well, whenever it inserted. Inserting after
the lock is released makes it short enough that four single-threaded writer processes rarely
meet on it; waiting for it had cost them about a tenth of their throughput.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30
"""

from __future__ import annotations

import pathlib
import runpy

from alembic import op

revision = "0006"
down_revision = "0005"
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
    -- Held to the commit: the next append to a stream must see this one's positions.
    FOR v_hash IN
        SELECT DISTINCT hashtext(e->>'stream') AS h FROM json_array_elements(batch) e ORDER BY h
    LOOP
        PERFORM pg_advisory_xact_lock({stream_class}, v_hash);
    END LOOP;
    -- A stream's head: its newest event's pos, or the head retention recorded if larger.
    WITH items AS (
        SELECT t.e, t.n FROM json_array_elements(batch) WITH ORDINALITY AS t(e, n)
    ), heads AS (
        SELECT s.stream, GREATEST((
            SELECT h.head FROM gateway_kit_stream_heads h WHERE h.stream = s.stream
        ), COALESCE((
            SELECT ev.pos FROM gateway_kit_events ev
            WHERE ev.stream = s.stream ORDER BY ev.seq DESC LIMIT 1
        ), 0)) AS head
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

    -- The transaction id and the seqs, in one order for every append of the log.
    PERFORM pg_advisory_lock({lock_class}, hashtext(current_schema()));
    PERFORM pg_current_xact_id();
    v_last := setval('gateway_kit_events_seq', nextval('gateway_kit_events_seq') + v_count - 1);
    PERFORM pg_advisory_unlock({lock_class}, hashtext(current_schema()));

    INSERT INTO gateway_kit_events
        (seq, stream, pos, run_id, type, data, upstream_event_id, created_at)
    SELECT v_last - v_count + i, v_streams[i], v_pos[i], v_runs[i], v_types[i], v_data[i],
           v_upstream[i], now_ts
    FROM generate_subscripts(v_streams, 1) AS i;
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
    out_pos := GREATEST((
        SELECT h.head FROM gateway_kit_stream_heads h WHERE h.stream = p_stream
    ), COALESCE((
        SELECT ev.pos FROM gateway_kit_events ev
        WHERE ev.stream = p_stream ORDER BY ev.seq DESC LIMIT 1
    ), 0)) + 1;
    PERFORM pg_advisory_lock({lock_class}, hashtext(current_schema()));
    PERFORM pg_current_xact_id();
    out_seq := nextval('gateway_kit_events_seq');
    PERFORM pg_advisory_unlock({lock_class}, hashtext(current_schema()));
    INSERT INTO gateway_kit_events
        (seq, stream, pos, run_id, type, data, upstream_event_id, created_at)
    VALUES (out_seq, p_stream, out_pos, p_run_id, p_type, p_data, p_upstream, now_ts);
END
$$;
"""


def revision_0005_functions() -> list[str]:
    """The append functions as revision 0005 left them (0004's, with its head lookup)."""
    script = pathlib.Path(__file__).with_name("0005_stream_heads.py")
    previous = runpy.run_path(str(script))
    functions = []
    for name, function in previous["revision_0004_functions"]().items():
        edits = previous["LOOKUPS"][name]
        for old, new in zip(edits[::2], edits[1::2], strict=True):
            assert function.count(old) == 1, f"revision 0004's {name} is not as expected"
            function = function.replace(old, new)
        functions.append(function)
    return functions


def upgrade() -> None:
    _create((APPEND_FUNCTION, APPEND_ONE_FUNCTION))


def downgrade() -> None:
    _create(revision_0005_functions())


def _create(functions: tuple[str, ...] | list[str]) -> None:
    from gateway_kit.log.schema import APPEND_LOCK_CLASS, STREAM_LOCK_CLASS

    if op.get_bind().dialect.name != "postgresql":
        return
    for function in functions:
        op.execute(function.format(lock_class=APPEND_LOCK_CLASS, stream_class=STREAM_LOCK_CLASS))
