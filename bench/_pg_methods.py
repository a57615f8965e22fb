"""The ways of appending to an event log on PostgreSQL that log_postgres.py compares.

Every method writes the same rows into a table with the same columns and indexes as
gateway_kit's own; the horizon methods add an xid8 column. Writers and the reader
(_pg_reader.py) run in processes of their own (_pg_workers.py).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any
from urllib.parse import quote

import psycopg
from _common import RUN_ID, TYPE, encode, payload
from sqlalchemy.engine import make_url

from gateway_kit import EventLog

GATEWAY_KIT = "gateway_kit"
PLAIN = "plain"
LOCK_RT = "lock-rt"
HORIZON = "horizon"
HORIZON_SEQ = "horizon-seq"
LOCK_XID = "lock-xid"
LOCK_XID_NOTIFY = "lock-xid-notify"
METHODS = (GATEWAY_KIT, PLAIN, LOCK_RT, HORIZON, LOCK_XID, HORIZON_SEQ, LOCK_XID_NOTIFY)
OPT_IN = (HORIZON_SEQ, LOCK_XID_NOTIFY)  # run only when named in --methods
# Methods whose reader keeps to rows of transactions below the visibility horizon.
HORIZON_METHODS = (HORIZON, HORIZON_SEQ, LOCK_XID, LOCK_XID_NOTIFY)
PAGE = 1000
GK_TABLE = "gateway_kit_events"
# Advisory locks are database-wide, not per schema: keys of our own, fixed rather than random
# because every spawned process must lock the same one.
LOCK_KEY = 0x62656E6368  # "bench"
STREAM_LOCK_CLASS = 0x626E  # first half of the two-int keys that lock-xid takes per stream

TABLE_DDL = """
CREATE TABLE {table} (
    seq bigserial PRIMARY KEY,
    stream text NOT NULL,
    pos integer NOT NULL,
    run_id text,
    type text NOT NULL,
    data text NOT NULL,
    upstream_event_id text,
    created_at double precision NOT NULL
    {extra}
);
CREATE INDEX {table}_stream_seq ON {table} (stream, seq);
CREATE INDEX {table}_run_id ON {table} (run_id, seq) WHERE run_id IS NOT NULL;
"""
XID_COLUMN = ", xid xid8 NOT NULL DEFAULT pg_current_xact_id()"
XID_INDEX = "CREATE INDEX {table}_xid_seq ON {table} (xid, seq)"
INSERT_SQL = (
    "INSERT INTO {table} (stream, pos, run_id, type, data, upstream_event_id, created_at) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING seq"
)
LOCK_SQL = f"SELECT pg_advisory_xact_lock({LOCK_KEY})"
LOCK_XID_FUNCTION = f"""
CREATE OR REPLACE FUNCTION bench_lock_xid_append(
    p_stream text, p_run_id text, p_type text, p_data text, p_upstream text,
    p_at double precision, OUT o_seq bigint, OUT o_pos integer)
LANGUAGE plpgsql AS $$
BEGIN
    -- Appends to one stream queue here until the previous one has committed, so its head pos
    -- is visible. An advisory lock assigns no xid, so none is taken before the global lock.
    PERFORM pg_advisory_xact_lock({STREAM_LOCK_CLASS}, hashtext(p_stream));
    o_pos := COALESCE((SELECT pos FROM bench_lock_xid WHERE stream = p_stream
                       ORDER BY seq DESC LIMIT 1), 0) + 1;
    -- Everyone takes xid and seq in the same order, and lets go before the commit's WAL flush.
    PERFORM pg_advisory_lock({LOCK_KEY});
    PERFORM pg_current_xact_id();
    INSERT INTO bench_lock_xid (stream, pos, run_id, type, data, upstream_event_id, created_at)
    VALUES (p_stream, o_pos, p_run_id, p_type, p_data, p_upstream, p_at)
    RETURNING seq INTO o_seq;
    PERFORM pg_advisory_unlock({LOCK_KEY});
END
$$
"""
LOCK_XID_SQL = "SELECT o_seq, o_pos FROM bench_lock_xid_append(%s, %s, %s, %s, %s, %s)"
# lock-xid-notify wakes listeners as gateway_kit does, but after the append's commit, outside
# the ordering lock. NOTIFY takes an xid and a database-wide lock held through its own commit
# flush, so one per append is costly; a notifier coalescing them off the append path would not be.
NOTIFY_AFTER_SQL = "SELECT pg_notify('bench_events', %s::text)"
# Every reader fetches whole events, as gateway_kit's `log.read` does: the same work on the
# reading side (it shares the machine with the writers), and seq comes first.
EVENT_COLUMNS = "stream, pos, run_id, type, data, upstream_event_id, created_at"
READ_SEQ_SQL = f"SELECT seq, {EVENT_COLUMNS} FROM {{table}} WHERE seq > %s ORDER BY seq LIMIT %s"
# Rows of transactions below the horizon are final: every transaction older than the oldest one
# in progress has ended, so no row can appear there later. Read in (xid, seq) order.
READ_HORIZON_SQL = (
    f"SELECT seq, xid::text, {EVENT_COLUMNS} FROM {{table}} "
    "WHERE (xid, seq) > (%s::xid8, %s) AND xid < pg_snapshot_xmin(pg_current_snapshot()) "
    "ORDER BY xid, seq LIMIT %s"
)
READ_HORIZON_SEQ_SQL = (
    f"SELECT seq, {EVENT_COLUMNS} FROM {{table}} "
    "WHERE seq > %s AND xid < pg_snapshot_xmin(pg_current_snapshot()) ORDER BY seq LIMIT %s"
)


def table_of(method: str) -> str:
    if method == GATEWAY_KIT:
        return GK_TABLE
    if method == LOCK_XID_NOTIFY:
        return table_of(LOCK_XID)  # the same table and append function
    return "bench_" + method.replace("-", "_")


def libpq(url: str) -> str:
    """A libpq URI from a SQLAlchemy URL such as postgresql+psycopg://user@host/db."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def with_search_path(url: str, schema: str) -> str:
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


def prepare_table(admin: psycopg.Connection[Any], method: str) -> None:
    """An empty table for `method`, behind a fresh checkpoint."""
    table = table_of(method)
    if method == GATEWAY_KIT:
        admin.execute(f"TRUNCATE {table}")  # the migration made it once
    else:
        admin.execute(f"DROP TABLE IF EXISTS {table}")
        extra = XID_COLUMN if method in HORIZON_METHODS else ""
        admin.execute(TABLE_DDL.format(table=table, extra=extra))
        if method == HORIZON:
            admin.execute(XID_INDEX.format(table=table))
        if method in (LOCK_XID, LOCK_XID_NOTIFY):
            admin.execute(LOCK_XID_FUNCTION)
    # So that no checkpoint lands in the middle of one run only (superusers and pg_checkpoint).
    with contextlib.suppress(psycopg.errors.InsufficientPrivilege):
        admin.execute("CHECKPOINT")


# --- writers -------------------------------------------------------------------------------

Append = Callable[[int], None]


def gk_appenders(url: str, streams: list[str]) -> tuple[list[Append], Callable[[], None]]:
    log = EventLog(url)  # one log per process, shared by its threads: group commit

    def append(stream: str, i: int) -> None:
        log.append(stream=stream, type=TYPE, data=payload(i), run_id=RUN_ID)

    return [partial(append, stream) for stream in streams], log.close


def raw_appenders(
    url: str, method: str, streams: list[str]
) -> tuple[list[Append], Callable[[], None]]:
    insert = INSERT_SQL.format(table=table_of(method))

    def append(conn: psycopg.Connection[Any], stream: str, i: int) -> None:
        data = encode(payload(i))
        if method in (LOCK_XID, LOCK_XID_NOTIFY):
            params = (stream, RUN_ID, TYPE, data, None, time.time())
            seq = conn.execute(LOCK_XID_SQL, params).fetchone()
            if method == LOCK_XID_NOTIFY and seq is not None:
                conn.execute(NOTIFY_AFTER_SQL, (seq[0],))
            return
        row = (stream, i + 1, RUN_ID, TYPE, data, None, time.time())
        if method == LOCK_RT:
            with conn.transaction():  # BEGIN; lock; INSERT; COMMIT: four round trips
                conn.execute(LOCK_SQL)
                conn.execute(insert, row).fetchone()
        else:
            conn.execute(insert, row).fetchone()

    # One connection per thread, as a web app's pool would hand out; autocommit.
    conns = [psycopg.connect(libpq(url), autocommit=True) for _ in streams]

    def close() -> None:
        for conn in conns:
            conn.close()

    return [partial(append, c, s) for c, s in zip(conns, streams, strict=True)], close


def writer_main(
    method: str, url: str, index: int, threads: int, events: int, gate: Any, results: Any
) -> None:
    """Append `events` events from `threads` threads, each to a stream of its own."""
    streams = [f"w{index}-t{t}" for t in range(threads)]
    if method == GATEWAY_KIT:
        appenders, close = gk_appenders(url, streams)
    else:
        appenders, close = raw_appenders(url, method, streams)
    shares = [events // threads + (t < events % threads) for t in range(threads)]
    errors: list[str] = []

    def work(append: Append, count: int) -> None:
        try:
            for i in range(count):
                append(i)
        except Exception as exc:
            errors.append(repr(exc))

    try:
        gate.wait()
        start = time.monotonic()
        if threads == 1:
            work(appenders[0], shares[0])
        else:
            pool = [
                threading.Thread(target=work, args=(append, count))
                for append, count in zip(appenders, shares, strict=True)
            ]
            for thread in pool:
                thread.start()
            for thread in pool:
                thread.join()
        results.put(("writer", start, time.monotonic(), errors))
    finally:
        close()
