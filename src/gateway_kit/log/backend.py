"""What the event log needs from a database, and the parts both backends share.

The events are appended and read on the drivers' own DB-API connections (sqlite3, psycopg),
with SQL written here, not through SQLAlchemy: this is the measured hot path (`bench/log_sqlite.py`
and `bench/log_postgres.py` compare it with plain sqlite3 and psycopg). A group commit writes a
whole batch of appends with one statement (`executemany`, or one call of the append function
on PostgreSQL) in one transaction, and a read is one query on the thread's own connection,
with no per-row or per-statement cost of SQLAlchemy's Core or ORM on the way. The tables beside
the log, touched a few times per run, go through SQLAlchemy (`tables.py`).

A little over 300 lines: the protocol both backends fill in, and the reading and writing they
share, are read together when a third backend is written.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import sqlalchemy as sa

from ..exceptions import LogClosed
from .event import TERMINAL_TYPES, Event, NewEvent
from .schema import COLUMNS, EVENTS, META, STREAM_HEADS
from .transaction import Transaction

Row = Sequence[Any]
T = TypeVar("T")


class Backend(Protocol):
    """One database behind an `EventLog`.

    `insert` and `transact` are only ever called by one thread at a time (under the log's write
    lock); everything else may be called from any thread.
    """

    dialect: str
    # Whether every read sees a commit as soon as it returns (False where readers keep to
    # settled rows, which a fresh commit may not be yet).
    commits_readable_at_once: bool

    def engine(self) -> sa.Engine: ...
    def version(self) -> str | None: ...
    def epoch(self) -> str: ...
    def insert(
        self, batch: Sequence[NewEvent], now: float, end: RunEnd | None = None
    ) -> list[Event]: ...
    def read(
        self,
        after: int,
        stream: str | None,
        run_id: str | None,
        limit: int,
        types: tuple[str, ...] = (),
        settled: bool = True,
        max_bytes: int | None = None,
    ) -> list[Event]: ...
    def last_seq(self, stream: str | None) -> int: ...
    def latest(self, query: Latest) -> Event | None: ...
    def prune(
        self, finished_before: float, archive: Callable[[list[Event]], None] | None
    ) -> int: ...
    def watch(
        self,
        changed: Callable[[], None],
        stop: Callable[[], bool],
        listening: Callable[[], None] = ...,
    ) -> None: ...
    def select(self, sql: str, params: Any) -> tuple[tuple[str, ...], list[Row]]: ...
    def transact(self, work: Callable[[Transaction], T]) -> T: ...
    def close(self) -> None: ...


CLOSE_WAIT_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class RunEnd:
    """An insert with `also` run in the same transaction after it (it raises to undo
    everything). With a `run_id` it ends that run: written only if the run has no terminal
    event yet; without one it only writes rows beside the events."""

    run_id: str | None
    also: Callable[[Transaction, list[Event]], None] | None = None


def run_ended_sql(placeholder: str) -> str:
    """A row when the run already has a terminal event."""
    terminal = ", ".join(f"'{t}'" for t in sorted(TERMINAL_TYPES))
    return f"SELECT 1 FROM {EVENTS} WHERE run_id = {placeholder} AND type IN ({terminal}) LIMIT 1"


class Closable(Protocol):
    def close(self) -> None: ...
    def execute(self, sql: str, params: Sequence[Any] = ..., /) -> Any: ...


C = TypeVar("C", bound=Closable)


class Connections(Generic[C]):
    """Every connection a backend opened, so that closing the backend closes them all.

    A thread may still be opening one while the log closes: it is closed at once and the
    thread gets `LogClosed`, instead of the connection being left open.
    """

    def __init__(self, lost: Callable[[C, Exception], Exception | None] | None = None) -> None:
        # What a failed read becomes when it failed because its connection was lost (the
        # connection is then dropped, and the read made once more on a new one); None when
        # the connection is still good.
        self._lost = lost
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._open: list[C] = []
        self._users = 0
        self._closed = False
        self._local = threading.local()

    @contextlib.contextmanager
    def in_use(self) -> Iterator[None]:
        """Around every use of a shared connection: closing waits until none is in use, since
        closing a connection under a query running in another thread can crash the process."""
        with self._lock:
            if self._closed:
                raise LogClosed("this EventLog is closed")
            self._users += 1
        try:
            yield
        finally:
            with self._lock:
                self._users -= 1
                if not self._users:
                    self._idle.notify_all()

    def fetch(
        self,
        connect: Callable[[], C],
        sql: str,
        params: Sequence[Any] = (),
        *,
        one: bool = False,
        named: bool = False,
        take: Callable[[Any], Any] | None = None,
    ) -> Any:
        """Run a query on this thread's reader connection (opened with `connect` when needed);
        `named`: the rows with their column names, as ``(names, rows)``; `take`: what it
        returns of the cursor, which it may step through only in part."""
        with self.in_use():
            for again in (True, False):
                conn: C | None = getattr(self._local, "conn", None)
                if conn is None or getattr(conn, "closed", False):
                    conn = self._local.conn = connect()
                try:
                    cur = conn.execute(sql, params)
                    if take is not None:
                        return take(cur)
                    if named:
                        return tuple(column[0] for column in cur.description), cur.fetchall()
                    return cur.fetchone() if one else cur.fetchall()
                except Exception as exc:
                    lost = self._lost(conn, exc) if self._lost is not None else None
                    if lost is None:
                        raise
                    self._local.conn = None
                    self.discard(conn)
                    if not again:
                        raise lost from exc

    def discard(self, conn: C) -> None:
        """Close a connection that was lost, and forget it."""
        with self._lock:
            if conn in self._open:
                self._open.remove(conn)
        with contextlib.suppress(Exception):
            conn.close()

    def add(self, conn: C) -> C:
        with self._lock:
            if not self._closed:
                self._open.append(conn)
                return conn
        conn.close()
        raise LogClosed("this EventLog is closed")

    def close_all(self) -> None:
        with self._lock:
            self._closed = True
            self._idle.wait_for(lambda: not self._users, CLOSE_WAIT_SECONDS)
            conns, self._open = self._open, []
        for conn in conns:
            conn.close()


def row_to_event(row: Row) -> Event:
    return Event(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7])


def select_sql(
    stream: str | None,
    run_id: str | None,
    placeholder: str,
    settled: str = "true",
    types: tuple[str, ...] = (),
) -> str:
    """Events after a cursor; `settled` keeps to rows no later commit can precede."""
    where = [f"seq > {placeholder}", settled]
    if stream is not None:
        where.append(f"stream = {placeholder}")
    if run_id is not None:
        where.append(f"run_id = {placeholder}")
    if types:
        where.append(f"type IN ({', '.join([placeholder] * len(types))})")
        return (
            f"SELECT {COLUMNS} FROM {EVENTS} WHERE seq IN ({_seqs_where(where)}) "
            f"ORDER BY seq LIMIT {placeholder}"
        )
    return (
        f"SELECT {COLUMNS} FROM {EVENTS} WHERE {' AND '.join(where)} "
        f"ORDER BY seq LIMIT {placeholder}"
    )


def _seqs_where(where: list[str], pick: str = "seq") -> str:
    """The seqs of events by type, in a query of their own: asked with an ORDER BY seq, the
    planner walks a run's events in seq order, checking each one's type, rather than take the
    index on run and type."""
    return f"SELECT {pick} FROM {EVENTS} WHERE {' AND '.join(where)}"


def select_params(
    after: int, stream: str | None, run_id: str | None, limit: int, types: tuple[str, ...] = ()
) -> list[Any]:
    params: list[Any] = [after]
    if stream is not None:
        params.append(stream)
    if run_id is not None:
        params.append(run_id)
    params.extend(types)
    params.append(limit)
    return params


@dataclass(frozen=True, slots=True)
class Latest:
    """The newest event matching every given field (seq > after)."""

    stream: str | None = None
    run_id: str | None = None
    after: int = 0
    upstream_only: bool = False
    upstream_event_id: str | None = None
    upto: int | None = None  # and seq <= upto
    terminal: bool = False  # only a run's terminal events, and the oldest of them

    def sql(self, placeholder: str) -> tuple[str, list[Any]]:
        where, params = [f"seq > {placeholder}"], [self.after]
        for column in ("stream", "run_id", "upstream_event_id"):
            value = getattr(self, column)
            if value is not None:
                where.append(f"{column} = {placeholder}")
                params.append(value)
        if self.upstream_only:
            where.append("upstream_event_id IS NOT NULL")
        if self.upto is not None:
            where.append(f"seq <= {placeholder}")
            params.append(self.upto)
        if self.terminal:
            where.append(f"type IN ({', '.join(map(repr, sorted(TERMINAL_TYPES)))})")
            oldest = _seqs_where(where, "MIN(seq)")
            return f"SELECT {COLUMNS} FROM {EVENTS} WHERE seq = ({oldest})", params
        sql = (
            f"SELECT {COLUMNS} FROM {EVENTS} WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT 1"
        )
        return sql, params


PRUNED_SEQ_KEY = "pruned_seq"


def last_seq_sql(stream: str | None, placeholder: str, greatest: str, settled: str = "true") -> str:
    """The newest settled seq; for the whole log, never lower than what retention deleted,
    so that pruning the newest events does not make valid cursors look beyond the head."""
    where = settled if stream is None else f"{settled} AND stream = {placeholder}"
    newest = f"SELECT seq FROM {EVENTS} WHERE {where} ORDER BY seq DESC LIMIT 1"
    if stream is not None:
        return f"SELECT COALESCE(({newest}), 0)"
    pruned = f"SELECT CAST(value AS BIGINT) FROM {META} WHERE key = '{PRUNED_SEQ_KEY}'"
    return f"SELECT {greatest}(COALESCE(({newest}), 0), COALESCE(({pruned}), 0))"


def record_pruned_sql(greatest: str) -> str:
    """Remember the newest seq before retention deletes events; never lower it, since
    retention in another process may have recorded a newer one."""
    recorded, newest = (f"CAST({t}.value AS BIGINT)" for t in (META, "excluded"))
    return (
        f"INSERT INTO {META} (key, value) SELECT '{PRUNED_SEQ_KEY}', CAST(MAX(seq) AS TEXT) "
        f"FROM {EVENTS} WHERE true ON CONFLICT (key) DO UPDATE "
        f"SET value = CAST({greatest}({recorded}, {newest}) AS TEXT)"
    )


def record_heads_sql(placeholder: str, greatest: str) -> str:
    """Remember the head pos of the streams of one run, before its events are deleted."""
    return (
        f"INSERT INTO {STREAM_HEADS} (stream, head) "
        f"SELECT stream, MAX(pos) FROM {EVENTS} WHERE run_id = {placeholder} GROUP BY stream "
        f"ON CONFLICT (stream) DO UPDATE "
        f"SET head = {greatest}({STREAM_HEADS}.head, excluded.head)"
    )


def prunable_runs_sql(placeholder: str) -> str:
    """Runs whose terminal event is older than the cutoff, in streams with no active run, and
    their streams: rows of (run_id, stream).

    A run is active while it has events but no terminal one; its whole stream is left alone.
    """
    terminal = ", ".join(f"'{t}'" for t in sorted(TERMINAL_TYPES))
    return f"""
        SELECT t.run_id, t.stream FROM {EVENTS} t
        WHERE t.run_id IS NOT NULL AND t.type IN ({terminal})
        GROUP BY t.run_id, t.stream
        HAVING MAX(t.created_at) < {placeholder}
           AND t.stream NOT IN (
               SELECT a.stream FROM {EVENTS} a
               WHERE a.run_id IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM {EVENTS} f
                   WHERE f.run_id = a.run_id AND f.type IN ({terminal})
               )
           )
    """


def delete_runs(
    conn: Any,
    runs: Sequence[str],
    archive: Callable[[list[Event]], None] | None,
    placeholder: str,
    greatest: str,
) -> int:
    """Delete the events of `runs` in the caller's transaction on `conn` (sqlite3 or psycopg):
    first record the log's newest seq and the runs' stream heads, and give each run's events to
    `archive`. Returns how many events were deleted."""
    if not runs:
        return 0
    conn.execute(record_pruned_sql(greatest))
    deleted = 0
    for run_id in runs:
        if archive is not None:
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM {EVENTS} WHERE run_id = {placeholder} ORDER BY seq",
                (run_id,),
            ).fetchall()
            archive([row_to_event(r) for r in rows])
        conn.execute(record_heads_sql(placeholder, greatest), (run_id,))
        cur = conn.execute(f"DELETE FROM {EVENTS} WHERE run_id = {placeholder}", (run_id,))
        deleted += cur.rowcount
    return deleted
