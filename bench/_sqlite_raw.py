"""The raw sqlite3 side of log_sqlite.py: the same rows, the same table, nothing in between."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from _common import RUN_ID, STREAM, TYPE, encode, payload

# The table of gateway_kit's first migration, written out for the raw side.
SCHEMA = """
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    stream TEXT NOT NULL,
    pos INTEGER NOT NULL,
    run_id TEXT,
    type TEXT NOT NULL,
    data TEXT NOT NULL,
    upstream_event_id TEXT,
    created_at REAL NOT NULL
);
CREATE INDEX events_stream_seq ON events (stream, seq);
CREATE INDEX events_run_id ON events (run_id, seq) WHERE run_id IS NOT NULL;
"""
INSERT = (
    "INSERT INTO events (stream, pos, run_id, type, data, upstream_event_id, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)
SCAN = (
    "SELECT seq, stream, pos, run_id, type, data, upstream_event_id, created_at "
    "FROM events WHERE seq > ? ORDER BY seq"
)


def connect(path: Path) -> sqlite3.Connection:
    """A connection set up as gateway_kit's SQLite backend sets up its own."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=60)
    conn.execute("PRAGMA busy_timeout = 60000")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA journal_mode = WAL")
    if conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'events'").fetchone()[0] == 0:
        conn.executescript(SCHEMA)
    return conn


def rows(streams: list[str], count: int, start: int = 0) -> list[tuple[Any, ...]]:
    """Events start..start+count spread round-robin over `streams`, with their positions."""
    now = time.time()
    out = []
    for i in range(start, start + count):
        pos, stream = divmod(i, len(streams))
        out.append((streams[stream], pos + 1, RUN_ID, TYPE, encode(payload(i)), None, now))
    return out


def single(path: Path, events: int) -> float:
    """One insert per transaction (autocommit), one stream; seconds taken."""
    conn = connect(path)
    try:
        start = time.perf_counter()
        for i in range(events):
            row = (STREAM, i + 1, RUN_ID, TYPE, encode(payload(i)), None, time.time())
            conn.execute(INSERT, row)
        return time.perf_counter() - start
    finally:
        conn.close()


def batched(path: Path, events: int, batch: int, streams: list[str]) -> float:
    """The physical best: one connection, `batch` rows per transaction; seconds taken."""
    conn = connect(path)
    try:
        start = time.perf_counter()
        for first in range(0, events, batch):
            chunk = rows(streams, min(batch, events - first), first)
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(INSERT, chunk)
            conn.execute("COMMIT")
        return time.perf_counter() - start
    finally:
        conn.close()


def fill(path: Path, events: int, streams: list[str]) -> sqlite3.Connection:
    conn = connect(path)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany(INSERT, rows(streams, events))
    conn.execute("COMMIT")
    return conn


def replay(conn: sqlite3.Connection, events: int) -> float:
    """One scan of every row after seq 0, all columns, into a list; seconds taken."""
    start = time.perf_counter()
    found = conn.execute(SCAN, (0,)).fetchall()
    elapsed = time.perf_counter() - start
    assert len(found) == events, (len(found), events)
    return elapsed


def commits_in(path: Path, table: str) -> int:
    """How many transactions wrote `table`: every row of one commit shares its created_at."""
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute(f"SELECT count(DISTINCT created_at) FROM {table}").fetchone()[0])
    finally:
        conn.close()
