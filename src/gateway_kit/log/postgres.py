"""PostgreSQL backend, through psycopg 3.

Appends call ``gateway_kit_append`` (see migrations 0004 and 0006) as one autocommit statement.
Inside it an append locks the streams it writes (until its commit, so pos is gapless), then
takes its transaction id and its seqs under the log's ordering lock, lets the lock go, and
inserts: the lock is held briefly, and concurrent commits share WAL flushes. Commits may then
land out of seq order, so readers deliver only settled rows: those of transactions older than
every running one. Since appends take transaction ids in seq order, what a reader sees after a
cursor is always a gap-free prefix, and no reader tailing "after seq N" can skip an event that
commits late. Wake-ups cross processes through LISTEN/NOTIFY, sent after the commit; a
notification carries no data.

Every connection heals: a reader connection that was lost is replaced and the read made again;
a writer connection that was lost is replaced at the next write (a write it was running raises
`DatabaseUnavailable`, never made again here, since it may have committed); the listener and
the announcer reconnect by themselves (`reconnect.py` spaces the attempts out).

One module, though over 300 lines: the appends, the settled reads, the listener and the
announcer each depend on how the others use PostgreSQL's ordering lock and transaction ids.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import psycopg
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from ..exceptions import DatabaseUnavailable
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
from .database import postgres_engine
from .event import Event, NewEvent
from .pages import capped_sql_postgres, filter_params
from .reconnect import LOST, LOST_WRITING, Backoff, Gate, describe, hung_up, is_lost
from .schema import (
    LISTENER_LOCK_CLASS,
    META,
    NOTIFY_CHANNEL,
    RUN_END_LOCK_CLASS,
    STREAM_LOCK_CLASS,
    VERSION_TABLE,
)
from .transaction import Transaction

logger = logging.getLogger(__name__)

# Rows of transactions older than every running one: no append still in flight can commit a
# smaller seq, since appends take their transaction ids in seq order (migration 0004).
SETTLED = "xid < pg_snapshot_xmin(pg_current_snapshot())"
APPEND_SQL = "SELECT out_seq, out_pos FROM gateway_kit_append(%s::json, %s)"
APPEND_ONE_SQL = "SELECT out_seq, out_pos FROM gateway_kit_append_one(%s, %s, %s, %s, %s, %s)"
# Stream locks held by one retention transaction at most: PostgreSQL's lock table is shared
# and sized for about 64 locks per connection.
PRUNE_STREAMS_PER_TRANSACTION = 500
STREAM_HASHES_SQL = "SELECT DISTINCT hashtext(s) AS h FROM unnest(%s::text[]) AS s ORDER BY h"
LOCK_STREAM_SQL = "SELECT pg_advisory_xact_lock(%s, %s)"
LOCK_RUN_SQL = f"SELECT pg_advisory_xact_lock({RUN_END_LOCK_CLASS}, hashtext(%s))"
LISTENING_SQL = f"SELECT pg_advisory_lock_shared({LISTENER_LOCK_CLASS}, hashtext(current_schema()))"
# One round trip either way; the exclusive lock lasts only this statement.
# The channel is the database's; the payload names the schema, so that the logs of other
# schemas in the same database (other deployments) do not wake this one's tails.
NOTIFY_IF_LISTENED_SQL = (
    f"SELECT pg_notify('{NOTIFY_CHANNEL}', current_schema()) "
    f"WHERE NOT pg_try_advisory_xact_lock({LISTENER_LOCK_CLASS}, hashtext(current_schema()))"
)
LISTEN_TIMEOUT = 1.0  # seconds; how often the listener checks whether it should stop
# At most one NOTIFY per this many seconds and process: each is a commit that takes a
# database-wide lock, and at one per append they cost appends a quarter of their throughput.
ANNOUNCE_INTERVAL = 0.005
QUIET_INTERVAL = 0.1  # seconds before looking again for listeners after finding none
STOP_TIMEOUT = 5.0  # seconds closing the log waits for the last NOTIFY
# Seconds a connect may take, unless the URL says: a server that is down must not hold a
# caller for the operating system's TCP timeout.
CONNECT_TIMEOUT = 5
ANNOUNCER_DOWN = "announcing commits failed (%s); trying again in %.2g s"
ANNOUNCER_BACK = "announcing commits works again"


def conninfo(url: str) -> str:
    """A libpq URI from a SQLAlchemy URL such as ``postgresql+psycopg://user@host/db``."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresBackend:
    dialect = "postgresql"
    commits_readable_at_once = False

    def __init__(self, url: str) -> None:
        self._url = url
        self._conninfo = conninfo(url)
        self._connect_options: dict[str, Any] = {"autocommit": True}
        if "connect_timeout" not in self._conninfo:
            self._connect_options["connect_timeout"] = CONNECT_TIMEOUT
        self._gate = Gate()
        self._connections: Connections[psycopg.Connection[Any]] = Connections(_lost_read)
        self._writer: psycopg.Connection[Any] | None = None
        self._append_cursor: psycopg.Cursor[Any] | None = None
        self._writer_connection()
        self._announcer = Announcer(lambda: self._connect(shared=False))

    def _connect(self, *, shared: bool = True) -> psycopg.Connection[Any]:
        self._gate.check()
        try:
            # autocommit: every read sees the newest committed events, every append is one
            # statement.
            conn = psycopg.connect(self._conninfo, **self._connect_options)
        except psycopg.OperationalError as exc:
            raise self._gate.failed(exc) from exc
        self._gate.succeeded()
        # A connection only its own thread uses (watcher, announcer) is closed by that thread.
        return self._connections.add(conn) if shared else conn

    def _writer_connection(self) -> psycopg.Connection[Any]:
        """The writer connection, opened again if it was lost (under the log's write lock)."""
        conn = self._writer
        if conn is not None and not is_lost(conn) and not hung_up(conn):
            return conn
        if conn is not None:
            self._writer = self._append_cursor = None
            self._connections.discard(conn)
        conn = self._connect()
        # One cursor for every append: a new one per statement costs a sixth of an append's
        # client CPU.
        self._writer, self._append_cursor = conn, conn.cursor()
        return conn

    @contextlib.contextmanager
    def _writing(self) -> Iterator[psycopg.Connection[Any]]:
        """The writer connection, for one write; a write whose connection is lost meanwhile
        raises `DatabaseUnavailable` (it may have committed), and the next one reconnects."""
        conn = self._writer_connection()
        try:
            yield conn
        except psycopg.Error as exc:
            if not is_lost(conn):
                raise
            self._writer = self._append_cursor = None
            self._connections.discard(conn)
            raise DatabaseUnavailable(LOST_WRITING.format(error=describe(exc))) from exc

    def _fetch(self, sql: str, params: Sequence[Any] = (), *, one: bool = False) -> Any:
        return self._connections.fetch(self._connect, sql, params, one=one)

    def select(self, sql: str, params: Any) -> tuple[tuple[str, ...], list[Any]]:
        """A query of the tables beside the log, on this thread's reader connection."""
        found: tuple[tuple[str, ...], list[Any]] = self._connections.fetch(
            self._connect, sql, params, named=True
        )
        return found

    def engine(self) -> sa.Engine:
        return postgres_engine(self._url)

    def transact(self, work: Callable[[Transaction], T]) -> T:
        """`work` in a transaction of the writer connection."""
        with self._writing() as conn, conn.transaction():
            return work(Transaction(conn, self.dialect))

    def version(self) -> str | None:
        try:
            row = self._fetch(f"SELECT version_num FROM {VERSION_TABLE}", one=True)
        except psycopg.errors.UndefinedTable:
            return None
        return None if row is None else str(row[0])

    def epoch(self) -> str:
        row = self._fetch(f"SELECT value FROM {META} WHERE key = 'epoch'", one=True)
        assert row is not None
        return str(row[0])

    def insert(
        self, batch: Sequence[NewEvent], now: float, end: RunEnd | None = None
    ) -> list[Event]:
        with self._writing() as conn:
            try:
                # Without an end, one autocommit statement.
                events = self._append(batch, now) if end is None else self._end_run(batch, now, end)
            except BaseException:
                # The failed append may still hold the log's ordering lock (a session lock);
                # a lost connection took its locks with it.
                if not is_lost(conn):
                    with contextlib.suppress(psycopg.Error):
                        conn.execute("SELECT pg_advisory_unlock_all()")
                raise
        if events:
            self._announcer.announce()
        return events

    def _append(self, batch: Sequence[NewEvent], now: float) -> list[Event]:
        params: tuple[Any, ...]
        if len(batch) == 1:
            e = batch[0]
            sql, params = APPEND_ONE_SQL, (
                e.stream, e.run_id, e.type, e.data_json, e.upstream_event_id, now
            )  # fmt: skip
        else:
            sql, params = APPEND_SQL, (self._batch_json(batch), now)
        assert self._append_cursor is not None  # inside `_writing`
        rows = self._append_cursor.execute(sql, params).fetchall()
        return [
            Event(seq, e.stream, pos, e.run_id, e.type, e.data_json, e.upstream_event_id, now)
            for (seq, pos), e in zip(rows, batch, strict=True)
        ]

    def _end_run(self, batch: Sequence[NewEvent], now: float, end: RunEnd) -> list[Event]:
        """The batch, in one transaction with `end.also`, unless the run has already ended.

        Processes that end the same run wait for each other on the run's lock, and the one
        that comes second sees the first one's terminal event. The lock and the check write
        nothing, so the append is still what gives the transaction its id (in seq order).
        """
        conn = self._writer
        assert conn is not None  # inside `_writing`
        with conn.transaction():
            if end.run_id is not None:
                conn.execute(LOCK_RUN_SQL, (end.run_id,))
                if conn.execute(run_ended_sql("%s"), (end.run_id,)).fetchone():
                    return []
            events = self._append(batch, now)
            if end.also is not None:
                end.also(Transaction(conn, self.dialect), events)
        return events

    @staticmethod
    def _batch_json(batch: Sequence[NewEvent]) -> str:
        return json.dumps(
            [
                {
                    "stream": e.stream,
                    "type": e.type,
                    "data": e.data_json,
                    "run_id": e.run_id,
                    "upstream_event_id": e.upstream_event_id,
                }
                for e in batch
            ],
            ensure_ascii=False,
        )

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
        where = SETTLED if settled else "true"
        if max_bytes is None:
            sql = select_sql(stream, run_id, "%s", where, types)
            params = select_params(after, stream, run_id, limit, types)
        else:
            sql = capped_sql_postgres(stream, run_id, where, types)
            params = [after, *filter_params(stream, run_id, types), limit, max_bytes]
        rows = self._fetch(sql, params)
        return [Event(*r) for r in rows]

    def last_seq(self, stream: str | None) -> int:
        params = () if stream is None else (stream,)
        row = self._fetch(last_seq_sql(stream, "%s", "GREATEST", SETTLED), params, one=True)
        assert row is not None
        return int(row[0])

    def latest(self, query: Latest) -> Event | None:
        sql, params = query.sql("%s")
        row = self._fetch(sql, params, one=True)
        return None if row is None else row_to_event(row)

    def prune(self, finished_before: float, archive: Callable[[list[Event]], None] | None) -> int:
        prunable = prunable_runs_sql("%s")
        with self._writing() as conn:
            candidates = streams_by_run(conn.execute(prunable, (finished_before,)))
            deleted = 0
            for streams in stream_groups(candidates.values(), PRUNE_STREAMS_PER_TRANSACTION):
                deleted += self._prune_streams(conn, streams, prunable, finished_before, archive)
        return deleted

    def _prune_streams(
        self,
        conn: psycopg.Connection[Any],
        streams: set[str],
        prunable: str,
        finished_before: float,
        archive: Callable[[list[Event]], None] | None,
    ) -> int:
        """Prune the runs that lie wholly in `streams`, in one transaction."""
        with conn.transaction():
            # The query after the locks must see what the appends it waited for committed.
            conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            # An append holds the locks of the streams it writes until it commits. Taking them
            # waits for every append in flight to these streams, whose rows the first query
            # could not see yet, and keeps new ones out until we commit: a run that is starting
            # in a stream is seen before that stream's old runs are deleted. In the appends'
            # order (by hash), so that neither side waits for the other in a circle.
            for (key,) in conn.execute(STREAM_HASHES_SQL, (sorted(streams),)).fetchall():
                conn.execute(LOCK_STREAM_SQL, (STREAM_LOCK_CLASS, key))
            now_prunable = streams_by_run(conn.execute(prunable, (finished_before,)))
            runs = [run for run, where in now_prunable.items() if where <= streams]
            return delete_runs(conn, runs, archive, "%s", "GREATEST")

    def watch(
        self,
        changed: Callable[[], None],
        stop: Callable[[], bool],
        listening: Callable[[], None] = lambda: None,
    ) -> None:
        """Call `changed` on every notification until `stop()`; `listening` once they come.
        `DatabaseUnavailable` when the connection is lost (the caller listens again)."""
        conn = self._connect(shared=False)
        try:
            # Before LISTEN: a writer that finds no holder of this lock sends no NOTIFY.
            conn.execute(LISTENING_SQL)
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            ours = ("", schema_of(conn))  # "": a writer of an earlier version names none
            listening()
            while not stop():
                for notification in conn.notifies(timeout=LISTEN_TIMEOUT, stop_after=1):
                    if notification.payload in ours:
                        changed()
        except psycopg.Error as exc:
            if not is_lost(conn):
                raise
            raise DatabaseUnavailable(LOST.format(error=describe(exc))) from exc
        finally:
            conn.close()

    def close(self) -> None:
        self._announcer.stop()
        self._connections.close_all()


def schema_of(conn: psycopg.Connection[Any]) -> str:
    """The schema `conn` writes to: the one its NOTIFYs name."""
    row = conn.execute("SELECT current_schema()").fetchone()
    return "" if row is None or row[0] is None else str(row[0])


class Announcer:
    """Tells other processes that events were committed: NOTIFY, sent after the commit.

    Inside the append it would take PostgreSQL's database-wide notify lock, held through the
    commit's flush, and keep appends of different processes from sharing a flush. Here, from a
    connection of its own, commits coalesce into one NOTIFY every few milliseconds at most; a
    tail that missed one still re-reads on its idle timeout. Stopping sends what is still due,
    so the last appends of a process that exits are announced too.

    A NOTIFY is a transaction of its own with a transaction id and a commit record, so none is
    sent while no process listens to this log: listeners hold a shared advisory lock, and the
    announcer's exclusive try-lock on it succeeds only when there is none. Listeners take the
    lock before they LISTEN, so a commit left unannounced came before every current listener
    listened: no NOTIFY could have reached them anyway. After finding no listener the announcer
    looks again only after `QUIET_INTERVAL`: a process that starts listening may wait that
    long for its first notification, and a process nobody listens to spends one statement per
    `QUIET_INTERVAL` on it rather than one per `ANNOUNCE_INTERVAL`.
    """

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._connect = connect
        self._pending = threading.Event()
        self._due = False  # commits not yet announced
        self._stopping = threading.Event()  # also cuts a pause short
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def announce(self) -> None:
        if self._thread is None:
            with self._start_lock:
                if self._thread is None and not self._stopping.is_set():
                    self._thread = threading.Thread(
                        target=self._run, name="gateway-kit-log-announcer", daemon=True
                    )
                    self._thread.start()
        self._due = True
        if not self._pending.is_set():  # set() takes a lock; most appends find it set
            self._pending.set()

    def _run(self) -> None:
        conn: psycopg.Connection[Any] | None = None
        backoff = Backoff()
        try:
            while True:
                self._pending.wait()
                self._pending.clear()
                # Read before _due: the log stops only after its last commit announced itself,
                # so once stopping is seen here, _due below holds every commit there will be.
                stopping = self._stopping.is_set()
                pause = ANNOUNCE_INTERVAL
                if self._due:  # read after clear(): a commit after this read sets it again
                    self._due = False
                    try:
                        if conn is not None and (is_lost(conn) or hung_up(conn)):
                            conn.close()  # the server restarted: a NOTIFY on it would be lost
                            conn = None
                        conn = conn if conn is not None else self._open()
                        if conn.execute(NOTIFY_IF_LISTENED_SQL).fetchone() is None:
                            pause = QUIET_INTERVAL  # nobody listens
                        if backoff.failures:
                            logger.info(ANNOUNCER_BACK)
                        backoff.reset()
                    except Exception as exc:
                        # Lost, or never reached: tails elsewhere re-read on their idle
                        # timeout, and listeners that reconnect re-read at once. Announced
                        # again once the database is back.
                        if conn is not None:
                            conn.close()
                            conn = None
                        if stopping:
                            return
                        self._due = True
                        self._pending.set()
                        pause = backoff.next()
                        log = logger.warning if backoff.failures == 1 else logger.debug
                        expected = isinstance(exc, DatabaseUnavailable | psycopg.OperationalError)
                        log(ANNOUNCER_DOWN, exc, pause, exc_info=not expected)
                if stopping:
                    return
                self._stopping.wait(pause)  # commits meanwhile share the next NOTIFY
        finally:
            if conn is not None:
                conn.close()

    def _open(self) -> psycopg.Connection[Any]:
        conn = self._connect()
        # A notification needs no durability: not waiting for its WAL flush keeps
        # PostgreSQL's notify lock, held through the commit, brief.
        conn.execute("SET synchronous_commit = off")
        return conn

    def stop(self) -> None:
        with self._start_lock:
            self._stopping.set()
            thread = self._thread
        self._pending.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(STOP_TIMEOUT)


def _lost_read(conn: psycopg.Connection[Any], error: Exception) -> Exception | None:
    """What a read that failed on `conn` becomes when `conn` was lost: `DatabaseUnavailable`."""
    if isinstance(error, psycopg.Error) and is_lost(conn):
        return DatabaseUnavailable(LOST.format(error=describe(error)))
    return None


def streams_by_run(rows: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """(run_id, stream) rows as each run's set of streams."""
    streams: dict[str, set[str]] = {}
    for run_id, stream in rows:
        streams.setdefault(run_id, set()).add(stream)
    return streams


def stream_groups(runs: Iterable[set[str]], limit: int) -> Iterator[set[str]]:
    """The streams of `runs` in groups of about `limit`, never splitting one run's streams."""
    group: set[str] = set()
    for streams in runs:
        if group and len(group | streams) > limit:
            yield group
            group = set()
        group |= streams
    if group:
        yield group
