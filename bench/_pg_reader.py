"""The tailing reader of log_postgres.py: reads after what it has seen, as each method allows."""

from __future__ import annotations

import time
from typing import Any

import psycopg
from _pg_methods import (
    GATEWAY_KIT,
    HORIZON,
    HORIZON_METHODS,
    PAGE,
    READ_HORIZON_SEQ_SQL,
    READ_HORIZON_SQL,
    READ_SEQ_SQL,
    libpq,
    table_of,
)

from gateway_kit import EventLog

CATCH_UP_TIMEOUT = 30.0  # seconds the reader waits, once the writers are done, to see it all


class Tail:
    """Reads the next page after what it has seen, the way `method` lets a reader do it."""

    def __init__(self, method: str, url: str) -> None:
        self.method = method
        self.table = table_of(method)
        self.log = EventLog(url) if method == GATEWAY_KIT else None
        self.conn = None if self.log else psycopg.connect(libpq(url), autocommit=True)
        self.after = 0
        self.after_xid = 0  # the horizon method's cursor is (xid, seq); the others' xid stays 0

    def next_page(self) -> list[int]:
        if self.log is not None:
            seqs = [event.seq for event in self.log.read(after=self.after, limit=PAGE)]
        elif self.method == HORIZON:
            assert self.conn is not None
            sql = READ_HORIZON_SQL.format(table=self.table)
            rows = self.conn.execute(sql, (str(self.after_xid), self.after, PAGE)).fetchall()
            if rows:
                self.after_xid = int(rows[-1][1])
            seqs = [row[0] for row in rows]
        else:
            assert self.conn is not None
            sql = READ_HORIZON_SEQ_SQL if self.method in HORIZON_METHODS else READ_SEQ_SQL
            cur = self.conn.execute(sql.format(table=self.table), (self.after, PAGE))
            seqs = [row[0] for row in cur]
        if seqs:
            self.after = seqs[-1]
        return seqs

    @property
    def position(self) -> tuple[int, int]:
        return self.after_xid, self.after

    def last(self) -> tuple[int, int]:
        """The position of the newest committed event: caught up once the cursor is there."""
        if self.log is not None:
            return 0, self.log.last_seq()
        assert self.conn is not None
        if self.method == HORIZON:
            sql = f"SELECT xid::text, seq FROM {self.table} ORDER BY xid DESC, seq DESC LIMIT 1"
            row = self.conn.execute(sql).fetchone()
            return (0, 0) if row is None else (int(row[0]), row[1])
        row = self.conn.execute(f"SELECT COALESCE(max(seq), 0) FROM {self.table}").fetchone()
        return 0, row[0] if row else 0

    def close(self) -> None:
        if self.log is not None:
            self.log.close()
        if self.conn is not None:
            self.conn.close()


def reader_main(method: str, url: str, poll: float, gate: Any, done: Any, results: Any) -> None:
    """Tail the log from the start; once the writers are done, read on until caught up.

    Caught up means the cursor reached the newest committed event, not merely an empty read: a
    horizon reader may wait a while for some unrelated transaction (autovacuum's ANALYZE, say)
    that holds the horizon back. After CATCH_UP_TIMEOUT it gives up, and what it has not seen
    counts as missed.
    """
    tail = Tail(method, url)
    seen: list[int] = []
    target: tuple[int, int] | None = None
    deadline = float("inf")
    try:
        gate.wait()
        while True:
            if target is None and done.is_set():
                target = tail.last()  # every append has committed by now
                deadline = time.monotonic() + CATCH_UP_TIMEOUT
            seqs = tail.next_page()
            seen.extend(seqs)
            if target is not None and (tail.position >= target or time.monotonic() > deadline):
                break
            if len(seqs) < PAGE:
                time.sleep(poll)
        results.put(("reader", time.monotonic(), seen))
    finally:
        tail.close()
