"""`RequestRows`: the observed requests of every tmux session, and the processes observing them.

Each process writes only its own requests, each row whole (`write` replaces a row by its id),
so several processes never write the same row. A process renews its own row in
``gateway_kit_execution_processes`` with every write, and at least every `PROCESS_TTL` / 3
seconds; the open requests of a process not seen for `PROCESS_TTL` seconds are read as ended
with it (`Outcome.PROCESS_GONE`), so that a crash never leaves a session "streaming" for ever.

A session is folded from its open requests and its newest `RECENT` ones: enough to find its
newest request and newest response, and bounded however long the session lives. So are its
rows: every `RECENT` rows a process writes of a session, the session's ended rows older than
its newest `RECENT` go, in the same transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..log import EventLog
from .state import Outcome, RequestRecord
from .tables import nth_newest_of_session, processes, requests

PROCESS_TTL = 15.0
RECENT = 20
COLUMNS = tuple(column.name for column in requests.columns)

OPEN = sa.select(requests).where(
    requests.c.tmux_session == sa.bindparam("tmux_session"), requests.c.ended_at.is_(None)
)
NEWEST = (
    sa.select(requests)
    .where(requests.c.tmux_session == sa.bindparam("tmux_session"))
    .order_by(requests.c.started_at.desc())
    .limit(RECENT)
)
# Of a session, the ended rows older than its RECENT newest: they are never read.
TRIM = requests.delete().where(
    requests.c.tmux_session == sa.bindparam("tmux_session"),
    requests.c.ended_at.is_not(None),
    requests.c.started_at < nth_newest_of_session(requests.c.started_at, RECENT),
)
# Sessions whose writes since their last trim are counted, at most (then counting starts over).
MAX_COUNTED = 10_000
SEEN = sa.select(processes.c.seen_at).where(processes.c.process == sa.bindparam("process"))
PRUNE = requests.delete().where(requests.c.ended_at < sa.bindparam("before"))
PRUNE_PROCESSES = processes.delete().where(processes.c.seen_at < sa.bindparam("before"))


def _statements(dialect: Any) -> tuple[sa.Executable, sa.Executable]:
    row = dialect.insert(requests)
    seen = dialect.insert(processes)
    return (
        row.on_conflict_do_update(
            index_elements=[requests.c.request_id],
            set_={name: row.excluded[name] for name in COLUMNS if name != "request_id"},
        ),
        seen.on_conflict_do_update(
            index_elements=[processes.c.process], set_={"seen_at": seen.excluded.seen_at}
        ),
    )


UPSERTS = {"sqlite": _statements(sqlite), "postgresql": _statements(postgresql)}


def as_row(record: RequestRecord) -> dict[str, Any]:
    return {name: getattr(record, name) for name in COLUMNS}


def as_record(row: Any) -> RequestRecord:
    return RequestRecord(**{name: getattr(row, name) for name in COLUMNS})


class RequestRows:
    def __init__(self, log: EventLog, *, process_ttl: float = PROCESS_TTL) -> None:
        self.log = log
        self.process_ttl = process_ttl
        self._untrimmed: dict[str, int] = {}  # rows written per session since its last trim

    def write(self, records: Sequence[RequestRecord], *, process: str, now: float) -> None:
        """Write `records` (rows replaced whole) and note `process` alive, in one transaction."""
        upsert_request, upsert_process = UPSERTS[self.log.tables.dialect]
        due = self._due_for_trim(records)
        with self.log.tables.transaction() as conn:
            if records:
                conn.execute(upsert_request, [as_row(record) for record in records])
            conn.execute(upsert_process, {"process": process, "seen_at": now})
            for tmux_session in due:
                conn.execute(TRIM, {"tmux_session": tmux_session})
        for tmux_session in due:
            self._untrimmed.pop(tmux_session, None)

    def _due_for_trim(self, records: Sequence[RequestRecord]) -> list[str]:
        counts = self._untrimmed
        if len(counts) > MAX_COUNTED:
            counts.clear()
        for record in records:
            counts[record.tmux_session] = counts.get(record.tmux_session, 0) + 1
        return [session for session, count in counts.items() if count >= RECENT]

    def read(self, tmux_session: str, now: float) -> list[RequestRecord]:
        """The requests `tmux_session` is folded from: its open ones (those of a process gone
        read as ended with it) and its newest ones."""
        tables = self.log.tables
        params = {"tmux_session": tmux_session}
        rows = {row.request_id: row for row in tables.select(NEWEST, params)}
        rows.update((row.request_id, row) for row in tables.select(OPEN, params))
        records = [
            RequestRecord(**{name: getattr(row, name) for name in COLUMNS}) for row in rows.values()
        ]
        owners = {record.process for record in records if record.open}
        if not owners:
            return records
        # One query per process with open requests of this session: one or two, as a rule.
        seen = {
            process: row.seen_at
            for process in owners
            for row in tables.select(SEEN, {"process": process})
        }
        return [self._ended_if_gone(record, seen, now) for record in records]

    def _ended_if_gone(
        self, record: RequestRecord, seen: dict[str, float], now: float
    ) -> RequestRecord:
        last_seen = seen.get(record.process)
        if not record.open or (last_seen is not None and now - last_seen < self.process_ttl):
            return record
        ended_at = max(record.started_at, last_seen if last_seen is not None else record.started_at)
        return dataclasses.replace(record, ended_at=ended_at, outcome=Outcome.PROCESS_GONE.value)

    def prune(self, before: float) -> None:
        """Forget requests that ended before `before`, and processes not seen since."""
        self.log.tables.write(PRUNE, {"before": before})
        self.log.tables.write(PRUNE_PROCESSES, {"before": before})
