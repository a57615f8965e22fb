"""`EventLog`: the append-only log every client reads by cursor.

Over 300 lines on purpose: it is the log's one public face, and its methods (append, read,
tail, prune, close) are each short, handing the work to the backends, the group commit, the
notifier and the pages; kept as one class, a user reads what a log does in one place.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Mapping
from datetime import timedelta
from typing import Any, Concatenate, ParamSpec, TypeVar

from ..exceptions import DatabaseUnavailable, InvalidCursor, InvalidEvent, LogClosed
from ..settings import DEFAULT_DATABASE_URL, check_database_url
from . import migrate
from .backend import Backend, Latest, RunEnd
from .event import (
    DEFAULT_MAX_PAYLOAD_BYTES,
    MAX_SEQ,
    TERMINAL_TYPES,
    Event,
    NewEvent,
    check_cursor,
    prepare,
    prepare_json,
    shown,
)
from .group_commit import GroupCommit
from .notifier import Notifier
from .postgres import PostgresBackend
from .reconnect import Backoff
from .schema import HEAD_REVISION
from .sqlite import SQLiteBackend
from .tables import Tables
from .transaction import Transaction

logger = logging.getLogger(__name__)

DEFAULT_READ_LIMIT = 1000
FIELDS = frozenset({"stream", "type", "data", "data_json", "run_id", "upstream_event_id"})
TAIL_BATCH = 1000
TAIL_BYTES = 4 * 1024 * 1024  # a tail holds one read's events: a few MiB, however large they are
# A tail re-reads this often even without a notification, in case one was lost.
IDLE_RECHECK_SECONDS = 2.0
# A tail that was woken for events committed but not yet given to readers (PostgreSQL: an
# older transaction still runs) looks again after this, then twice as long each time up to
# `idle_recheck`: no notification comes when that other transaction ends.
HELD_BACK_RECHECK_SECONDS = 0.02
WATCH_LOST = "the log watcher lost the database (%s); listening again in %.2g s"
WATCH_FAILED = "the log watcher failed; listening again in %.2g s"
WATCH_BACK = "the log watcher listens again"


P = ParamSpec("P")
R = TypeVar("R")


def async_twin(
    method: Callable[Concatenate[EventLog, P], R],
) -> Callable[Concatenate[EventLog, P], Coroutine[Any, Any, R]]:
    """The `a*` face of a sync method: the same call, taking the same arguments, made in a
    worker thread, so that an event loop never waits for the database."""

    @functools.wraps(method)
    async def twin(self: EventLog, /, *args: P.args, **kwargs: P.kwargs) -> R:
        return await asyncio.to_thread(method, self, *args, **kwargs)

    twin.__name__ = "a" + method.__name__
    twin.__qualname__ = f"EventLog.{twin.__name__}"
    twin.__doc__ = f"The async twin of `{method.__name__}`, taking the same arguments."
    return twin


def open_backend(url: str) -> Backend:
    url = check_database_url(url, source="EventLog(url)")
    if url.startswith("sqlite"):
        return SQLiteBackend(url)
    return PostgresBackend(url)


class EventLog:
    """The durable event log. Sync methods are safe from any thread; `a*` twins are for asyncio."""

    def __init__(
        self,
        url: str = DEFAULT_DATABASE_URL,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        idle_recheck: float = IDLE_RECHECK_SECONDS,
        migrate_on_open: bool = True,
    ) -> None:
        self.url = url
        self.max_payload_bytes = max_payload_bytes
        self.idle_recheck = idle_recheck
        self._backend = open_backend(url)
        try:
            if self._backend.version() != HEAD_REVISION:
                if not migrate_on_open:
                    raise RuntimeError(
                        f"the log at {url} is not at revision {HEAD_REVISION}: "
                        "run `gateway-kit db upgrade`"
                    )
                # Through the backend's own engine: an in-memory SQLite database exists only
                # for the connections the backend opens.
                engine = self._backend.engine()
                try:
                    migrate.upgrade(engine, shown_as=url)
                finally:
                    engine.dispose()
            self.epoch: str = self._backend.epoch()
        except BaseException:
            self._backend.close()
            raise
        self._write_lock = threading.Lock()
        # The tables beside the log, which every store reads and writes through.
        self.tables = Tables(self._backend, self._write_lock, self._check_open)
        self._group: GroupCommit[NewEvent, Event] = GroupCommit(self._commit, self._write_lock)
        self._notifier = Notifier()
        # Set while this process listens for other processes' commits (set again after an
        # outage), so that a caller can wait for it rather than guess.
        self.listening = threading.Event()
        self._commit_listeners: tuple[Callable[[int, list[Event]], None], ...] = ()
        self._closed = False
        self._watcher: threading.Thread | None = None
        self._watcher_lock = threading.Lock()
        self._closing = threading.Event()  # cuts the watcher's pause short

    # --- writing -------------------------------------------------------------------------

    def append(
        self,
        stream: str,
        type: str,
        data: Mapping[str, Any] | None = None,
        run_id: str | None = None,
        upstream_event_id: str | None = None,
    ) -> Event:
        item = prepare(
            stream=stream,
            type=type,
            data=data,
            run_id=run_id,
            upstream_event_id=upstream_event_id,
            max_payload_bytes=self.max_payload_bytes,
        )
        return self._submit([item])[0]

    def check(self, **fields: Any) -> None:
        """Validate an event as `append` would, writing nothing: `InvalidEvent` (or
        `PayloadTooLarge`) when `append` would refuse it. For checking everything a request
        will write before its first write."""
        self._prepare(fields)

    def append_many(self, events: Iterable[Mapping[str, Any]]) -> list[Event]:
        """Append several events in one transaction: all of them are written, or none.

        An event whose data arrived as JSON text may give it as ``data_json`` instead of
        ``data``: the JSON text of an object, which the caller has decoded already. It is
        stored as it is, not encoded again.
        """
        items = [self._prepare(e) for e in events]
        if not items:
            return []
        return self._submit(items)

    aappend = async_twin(append)
    aappend_many = async_twin(append_many)

    def _prepare(self, fields: Mapping[str, Any]) -> NewEvent:
        unknown = set(fields) - FIELDS
        if unknown:
            raise TypeError(f"unknown event fields: {', '.join(sorted(unknown))}")
        if "data_json" in fields:
            if "data" in fields:
                raise TypeError("give an event's data or its data_json, not both")
            return prepare_json(
                stream=fields.get("stream"),
                type=fields.get("type"),
                data_json=fields["data_json"],
                run_id=fields.get("run_id"),
                upstream_event_id=fields.get("upstream_event_id"),
                max_payload_bytes=self.max_payload_bytes,
            )
        data = fields.get("data")
        return prepare(
            stream=fields.get("stream"),
            type=fields.get("type"),
            data=data,
            run_id=fields.get("run_id"),
            upstream_event_id=fields.get("upstream_event_id"),
            max_payload_bytes=self.max_payload_bytes,
        )

    def _submit(self, items: list[NewEvent]) -> list[Event]:
        self._check_open()
        return self._group.submit(items)

    def end_run(
        self,
        stream: str,
        type: str,
        data: Mapping[str, Any] | None = None,
        *,
        run_id: str,
        before: Iterable[Mapping[str, Any]] = (),
        also: Callable[[Transaction, list[Event]], None] | None = None,
    ) -> Event | None:
        """Append a run's terminal event (`Finish` or `Error`) unless the run already has one.

        One transaction holds the events of `before` (if any; they belong to the run unless
        they name another `run_id`), the terminal event, and what
        `also(transaction, events)` writes to the tables beside the log; if `also` raises,
        nothing is written. Whatever several threads or processes do, a run ends this way at
        most once: the others get None.
        """
        if type not in TERMINAL_TYPES:
            raise InvalidEvent(f"a run ends with one of {sorted(TERMINAL_TYPES)}, not {type!r}")
        items = [self._prepare({"run_id": run_id, **e}) for e in before]
        terminal = {"stream": stream, "type": type, "data": data, "run_id": run_id}
        items.append(self._prepare(terminal))
        self._check_open()
        with self._write_lock:
            events = self._backend.insert(items, time.time(), RunEnd(run_id, also))
        if not events:
            return None
        self._announce(events)
        return events[-1]

    aend_run = async_twin(end_run)

    def append_with(
        self,
        events: Iterable[Mapping[str, Any]],
        also: Callable[[Transaction, list[Event]], None],
    ) -> list[Event]:
        """Append `events` in one transaction with what `also(transaction, events)` writes to
        the tables beside the log: a row's change and the events that tell of it are written
        together, or, when `also` raises, neither is."""
        items = [self._prepare(e) for e in events]
        if not items:
            raise ValueError("append_with writes rows together with events: give at least one")
        self._check_open()
        with self._write_lock:
            written = self._backend.insert(items, time.time(), RunEnd(None, also))
        if written:
            self._announce(written)
        return written

    def _commit(self, batch: list[NewEvent]) -> list[Event]:
        events = self._backend.insert(batch, time.time())
        self._announce(events)
        return events

    def _announce(self, events: list[Event]) -> None:
        # After commit: readers only ever see durable events.
        listeners = self._commit_listeners
        if not listeners:
            self._notifier.notify()
            return

        def tell(token: int) -> None:
            for listener in listeners:
                try:
                    listener(token, events)
                except Exception:  # the events are committed: the append itself succeeded
                    logger.exception("a commit listener failed")

        self._notifier.notify(tell)

    def add_commit_listener(
        self, listener: Callable[[int, list[Event]], None]
    ) -> Callable[[], None]:
        """Call `listener(token, events)` with the events of each commit this process makes.

        `token` is the `change_token` this commit sets. The listener runs in the committing
        thread, after the commit and before tails are woken, while the next group commit
        waits: it must only hand the events on (to an event loop, say).
        Commits of other processes are not reported; tails and reads see those. Nor is
        anything reported on a backend whose readers may not see a commit at once (PostgreSQL
        delivers only settled rows): there a reader could not yet find what a listener was
        told. Returns a function that removes the listener.
        """
        if not self._backend.commits_readable_at_once:
            return lambda: None
        with self._watcher_lock:
            self._commit_listeners += (listener,)

        def remove() -> None:
            with self._watcher_lock:
                others = (x for x in self._commit_listeners if x is not listener)
                self._commit_listeners = tuple(others)

        return remove

    # --- reading -------------------------------------------------------------------------

    def read(
        self,
        after: int = 0,
        stream: str | None = None,
        limit: int = DEFAULT_READ_LIMIT,
        *,
        run_id: str | None = None,
        types: Iterable[str] = (),
        settled: bool = True,
        max_bytes: int | None = None,
    ) -> list[Event]:
        """Events with seq > `after`, ordered by seq, at most `limit` of them; with `types`,
        only events of those types.

        `max_bytes` caps the page by size as well: it ends with the event that brings the size
        of the events' data (UTF-8 bytes of their JSON) to `max_bytes` or beyond, so it holds
        at least one event (see `gateway_kit.log.pages`; `may_continue` tells whether more
        may follow). The database stops there: the rows past the cap are never read out.

        `settled=False` reads every committed event, also those a reader following the log by
        cursor is not given yet (on PostgreSQL, while an older transaction may still commit
        a smaller seq): for reading back a run's events once their writers are done with
        them, which such a cursor read could miss for as long as any other transaction on
        the server runs.
        """
        after = check_cursor(after)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_SEQ:
            raise InvalidCursor(f"limit must be an integer from 1 to {MAX_SEQ}, got {shown(limit)}")
        if max_bytes is not None and (
            isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1
        ):
            raise InvalidCursor(
                f"max_bytes must be a positive integer or None, got {shown(max_bytes)}"
            )
        wanted = tuple(types)
        if any(not isinstance(t, str) for t in wanted):
            raise TypeError(f"types must be strings, got {wanted!r}")
        self._check_open()
        return self._backend.read(after, stream, run_id, limit, wanted, settled, max_bytes)

    aread = async_twin(read)

    def last_seq(self, stream: str | None = None) -> int:
        self._check_open()
        return self._backend.last_seq(stream)

    alast_seq = async_twin(last_seq)

    def latest(
        self,
        stream: str | None = None,
        *,
        run_id: str | None = None,
        after: int = 0,
        upstream_only: bool = False,
        upstream_event_id: str | None = None,
        upto: int | None = None,
    ) -> Event | None:
        """The newest event with `after` < seq <= `upto` matching the given fields, or None."""
        query = Latest(
            stream,
            run_id,
            check_cursor(after),
            upstream_only,
            upstream_event_id,
            None if upto is None else check_cursor(upto, name="upto"),
        )
        self._check_open()
        return self._backend.latest(query)

    def run_end(self, run_id: str) -> Event | None:
        """The run's terminal event: its first `Finish` or `Error`, or None while it runs."""
        self._check_open()
        return self._backend.latest(Latest(run_id=run_id, terminal=True))

    alatest = async_twin(latest)
    arun_end = async_twin(run_end)

    async def tail(
        self,
        after: int = 0,
        stream: str | None = None,
        *,
        run_id: str | None = None,
        batch: int = TAIL_BATCH,
    ) -> AsyncIterator[Event]:
        """Replay events after `after`, then yield new ones as they commit, forever.

        Every read is "after the last seq seen" on a log whose commit order is its seq order,
        so the hand-over from replay to live can neither skip nor repeat an event.
        """
        cursor = check_cursor(after)
        held_back = HELD_BACK_RECHECK_SECONDS
        while True:
            seen = self._notifier.version  # before reading, so no commit slips between
            events = await self.aread(cursor, stream, batch, run_id=run_id, max_bytes=TAIL_BYTES)
            if events:
                for event in events:
                    yield event
                cursor = events[-1].seq
                held_back = HELD_BACK_RECHECK_SECONDS
                continue
            self._start_watcher()
            wait = self.idle_recheck
            if await self._held_back(cursor, stream, run_id):
                wait = min(wait, held_back)
                held_back = min(held_back * 2, self.idle_recheck)
            await self._notifier.wait(seen, wait)
            self._check_open()

    async def _held_back(self, after: int, stream: str | None, run_id: str | None) -> bool:
        """Whether an event after `after` is committed but not given to readers yet."""
        if self._backend.commits_readable_at_once:
            return False
        return bool(await self.aread(after, stream, 1, run_id=run_id, settled=False))

    async def wait_for_change(self, seen: int, timeout: float) -> bool:
        """Wait until something may have been appended since `seen` (a `change_token`)."""
        self._start_watcher()
        return await self._notifier.wait(seen, timeout)

    @property
    def change_token(self) -> int:
        return self._notifier.version

    # --- housekeeping --------------------------------------------------------------------

    def prune(
        self,
        older_than: timedelta | float,
        archive: Callable[[list[Event]], None] | None = None,
    ) -> int:
        """Delete the events of runs that finished longer ago than `older_than`.

        A stream with an active run is never touched. `archive`, if given, receives each run's
        events before they are deleted, in the same transaction: if it raises, nothing of that
        transaction is deleted. On SQLite that is the whole prune; on PostgreSQL a prune of
        many streams goes in transactions of about 500 streams each, and runs deleted by the
        earlier ones stay deleted. Neither seq values nor a stream's positions are ever reused
        afterwards. Returns how many events were deleted.
        """
        age = older_than.total_seconds() if isinstance(older_than, timedelta) else older_than
        if age < 0:
            raise ValueError("older_than must not be negative")
        self._check_open()
        with self._write_lock:
            return self._backend.prune(time.time() - age, archive)

    def _start_watcher(self) -> None:
        if self._watcher is not None or self._closed:
            return
        with self._watcher_lock:
            if self._watcher is None:
                self._watcher = threading.Thread(
                    target=self._watch, name="gateway-kit-log-watcher", daemon=True
                )
                self._watcher.start()

    def _watch(self) -> None:
        """Watch for other processes' commits until the log closes; a watch that fails (the
        database went away) is started again after a pause that grows while it keeps failing.
        Meanwhile tails fall back to their idle re-checks."""
        backoff = Backoff()
        notify = self._notifier.notify

        def listening() -> None:
            if backoff.failures:
                logger.info(WATCH_BACK)
                notify()  # what was committed while nobody listened
            backoff.reset()
            self.listening.set()

        while not self._closed:
            try:
                self._backend.watch(notify, lambda: self._closed, listening)
            except LogClosed:
                return
            except Exception as exc:
                self.listening.clear()
                if self._closed:
                    return
                pause = backoff.next()
                if not isinstance(exc, DatabaseUnavailable):
                    logger.exception(WATCH_FAILED, pause)
                elif backoff.failures == 1:
                    logger.warning(WATCH_LOST, exc, pause)
                self._closing.wait(pause)

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosed("this EventLog is closed")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closing.set()
        self._notifier.notify()  # let tails notice
        with self._write_lock:
            self._backend.close()
        self.tables.close()

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"EventLog({self.url!r}, epoch={self.epoch!r})"
