"""SQLite backend: WAL, one writer at a time, seq is the rowid.

SQLite's single write lock already makes rowid order equal commit order, so a reader tailing
"after seq N" cannot miss an event. Other processes' appends are noticed through
``PRAGMA data_version``, which changes when another connection commits and costs no file read.
"""

from __future__ import annotations

import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url

from .backend import (
    Connections,
    Latest,
    RunEnd,
    T,
    delete_runs,
    last_seq_sql,
    prunable_runs_sql,
    row_to_event,
    run_ended_sql,
    select_params,
    select_sql,
)
from .database import sqlite_engine
from .event import Event, NewEvent
from .pages import capped_rows
from .schema import EVENTS, META, STREAM_HEADS, VERSION_TABLE
from .transaction import Transaction

BUSY_TIMEOUT_MS = 60_000
WATCH_INTERVAL = 0.2  # seconds between data_version checks while someone is tailing
INSERT_SQL = (
    f"INSERT INTO {EVENTS} (seq, stream, pos, run_id, type, data, upstream_event_id, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


# A stream's head pos: its newest event's or, if retention deleted newer ones, what it recorded.
HEAD_POS_SQL = (
    "SELECT max("
    f"COALESCE((SELECT pos FROM {EVENTS} WHERE stream = ? ORDER BY seq DESC LIMIT 1), 0), "
    f"COALESCE((SELECT head FROM {STREAM_HEADS} WHERE stream = ?), 0))"
)
MAX_KNOWN_HEADS = 10_000  # streams whose head pos the writer remembers between commits


class SQLiteBackend:
    dialect = "sqlite"
    commits_readable_at_once = True

    def __init__(self, url: str, *, synchronous: str = "FULL") -> None:
        parsed = make_url(url)
        database = parsed.database or ":memory:"
        if database == ":memory:":
            # Every connection must see the same in-memory database.
            self._target = f"file:gateway-kit-{uuid.uuid4().hex}?mode=memory&cache=shared"
            self._uri = True
        else:
            self._target = database
            self._uri = False
        self._synchronous = synchronous
        self._connections: Connections[sqlite3.Connection] = Connections()
        # The first connection also keeps a shared in-memory database alive.
        self._writer = self._connect()
        # What the writer last wrote: the log's last seq and each stream's head pos. They stay
        # true while no other connection commits, which PRAGMA data_version tells: it moves
        # only for commits of other connections (other processes, the tables beside the log).
        self._written_at: int | None = None  # data_version when they were last true
        self._last_seq = 0
        self._heads: dict[str, int] = {}
        self._enable_wal()

    def _enable_wal(self) -> None:
        """Switch a new database file to WAL. The switch needs the file to itself and SQLite
        answers "locked" at once, without its busy timeout, while another process (a second
        worker starting, say) holds it: so wait here."""
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            try:
                if self._writer.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._writer.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _connect(self, *, shared: bool = True) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self._target,
            uri=self._uri,
            isolation_level=None,  # we open transactions ourselves
            check_same_thread=False,
            timeout=BUSY_TIMEOUT_MS / 1000,
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA synchronous = {self._synchronous}")
        # A connection only its own thread uses (watcher, announcer) is closed by that thread.
        return self._connections.add(conn) if shared else conn

    def _fetch(self, sql: str, params: Sequence[Any] = (), *, one: bool = False) -> Any:
        return self._connections.fetch(self._connect, sql, params, one=one)

    def select(self, sql: str, params: Any) -> tuple[tuple[str, ...], list[Any]]:
        """A query of the tables beside the log, on this thread's reader connection."""
        found: tuple[tuple[str, ...], list[Any]] = self._connections.fetch(
            self._connect, sql, params, named=True
        )
        return found

    def engine(self) -> sa.Engine:
        return sqlite_engine(self._target, uri=self._uri)

    def transact(self, work: Callable[[Transaction], T]) -> T:
        """`work` in a transaction of the writer connection. It writes no events, so what the
        writer knows of the log's seqs and heads stays true."""
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = work(Transaction(conn, self.dialect))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def version(self) -> str | None:
        try:
            row = self._fetch(f"SELECT version_num FROM {VERSION_TABLE}", one=True)
        except sqlite3.OperationalError:
            return None
        return None if row is None else str(row[0])

    def epoch(self) -> str:
        row = self._fetch(f"SELECT value FROM {META} WHERE key = 'epoch'", one=True)
        return str(row[0])

    def insert(
        self, batch: Sequence[NewEvent], now: float, end: RunEnd | None = None
    ) -> list[Event]:
        conn = self._writer
        conn.execute("BEGIN IMMEDIATE")
        try:
            # The write lock is held from BEGIN IMMEDIATE: no other process can end the run
            # between this check and the commit.
            run_id = None if end is None else end.run_id
            if run_id is not None and conn.execute(run_ended_sql("?"), (run_id,)).fetchone():
                conn.execute("ROLLBACK")
                return []
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            if version != self._written_at:
                self._forget_written()
                row = conn.execute(
                    "SELECT seq FROM sqlite_sequence WHERE name = ?", (EVENTS,)
                ).fetchone()
                self._last_seq = 0 if row is None else int(row[0])
            heads = self._heads
            seq = self._last_seq
            rows: list[tuple[Any, ...]] = []
            for item in batch:
                pos = heads.get(item.stream)
                if pos is None:
                    pos = int(conn.execute(HEAD_POS_SQL, (item.stream, item.stream)).fetchone()[0])
                seq += 1
                pos += 1
                heads[item.stream] = pos
                rows.append(
                    (seq, item.stream, pos, item.run_id, item.type, item.data_json,
                     item.upstream_event_id, now)
                )  # fmt: skip
            conn.executemany(INSERT_SQL, rows)
            events = [Event(*r) for r in rows]
            if end is not None and end.also is not None:
                end.also(Transaction(conn, self.dialect), events)
            conn.execute("COMMIT")
        except BaseException:
            self._forget_written()  # heads may hold positions that were never committed
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        self._last_seq, self._written_at = seq, version
        if len(heads) > MAX_KNOWN_HEADS:
            heads.clear()
        return events

    def _forget_written(self) -> None:
        self._written_at = None
        self._heads = {}

    def read(
        self,
        after: int,
        stream: str | None,
        run_id: str | None,
        limit: int,
        types: tuple[str, ...] = (),
        settled: bool = True,
        max_bytes: int | None = None,
    ) -> list[Event]:
        # Every commit is readable at once here: what is committed is settled.
        sql = select_sql(stream, run_id, "?", types=types)
        params = select_params(after, stream, run_id, limit, types)
        if max_bytes is None:
            rows = self._fetch(sql, params)
        else:
            rows = self._connections.fetch(
                self._connect, sql, params, take=lambda cur: capped_rows(cur, max_bytes)
            )
        return [Event(*r) for r in rows]

    def last_seq(self, stream: str | None) -> int:
        params = () if stream is None else (stream,)
        return int(self._fetch(last_seq_sql(stream, "?", "MAX"), params, one=True)[0])

    def latest(self, query: Latest) -> Event | None:
        sql, params = query.sql("?")
        row = self._fetch(sql, params, one=True)
        return None if row is None else row_to_event(row)

    def prune(self, finished_before: float, archive: Callable[[list[Event]], None] | None) -> int:
        conn = self._writer
        self._forget_written()  # a stream may lose its head row
        conn.execute("BEGIN IMMEDIATE")
        try:
            runs = [r[0] for r in conn.execute(prunable_runs_sql("?"), (finished_before,))]
            deleted = delete_runs(conn, runs, archive, "?", "max")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return deleted

    def watch(
        self,
        changed: Callable[[], None],
        stop: Callable[[], bool],
        listening: Callable[[], None] = lambda: None,
    ) -> None:
        conn = self._connect(shared=False)
        try:
            version = conn.execute("PRAGMA data_version").fetchone()[0]
            listening()
            while not stop():
                time.sleep(WATCH_INTERVAL)
                now = conn.execute("PRAGMA data_version").fetchone()[0]
                if now != version:
                    version = now
                    changed()
        finally:
            conn.close()

    def close(self) -> None:
        self._connections.close_all()
