"""`UsageLedger`: what each run cost, per user and UTC day, recorded once per bill.

A bill is recorded by its idempotency key: the entry is inserted unless one with that key is
there (``INSERT … ON CONFLICT DO NOTHING``, on SQLite and PostgreSQL alike), and only an entry
that was inserted adds to its user's totals of the day, in the same transaction. So a bill
delivered again, by this process after a failure or by another process at the same moment,
adds nothing: on PostgreSQL the second insert waits for the first one's commit and then finds
its key; on SQLite the transaction holds the write lock from its start.

Reads (a user's totals, days and entries) are single queries on the log's reader connection.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from ..log import EventLog
from .tables import TOKENS, usage_days, usage_entries

# A user's days are listed newest first, this many at most: a year and a day.
MAX_DAYS = 366
ENTRIES_PAGE = 1000
EARLIEST = ""  # sorts before every YYYY-MM-DD
LATEST = "9999-12-31"

INSERT_VALUES: dict[str, Any] = {
    "idempotency_key": sa.bindparam("e_key"),
    "run_id": sa.bindparam("e_run_id"),
    "user_id": sa.bindparam("e_user_id"),
    "stream": sa.bindparam("e_stream"),
    "day": sa.bindparam("e_day"),
    **{name: sa.bindparam(f"e_{name}") for name in TOKENS},
    "cost": sa.bindparam("e_cost"),
    "billed_at": sa.bindparam("e_billed_at"),
}
DAY_VALUES: dict[str, Any] = {
    "user_id": sa.bindparam("e_user_id"),
    "day": sa.bindparam("e_day"),
    "runs": 1,
    **{name: sa.bindparam(f"e_{name}") for name in TOKENS},
    "cost": sa.bindparam("e_day_cost"),
}
IN_RANGE = sa.and_(
    usage_days.c.user_id == sa.bindparam("user_id"),
    usage_days.c.day >= sa.bindparam("since"),
    usage_days.c.day <= sa.bindparam("until"),
)
SUMMED = ("runs", *TOKENS, "cost")
TOTALS = sa.select(
    *(sa.func.coalesce(sa.func.sum(usage_days.c[name]), 0).label(name) for name in SUMMED)
).where(IN_RANGE)
DAYS = (
    sa.select(usage_days)
    .where(IN_RANGE)
    .order_by(usage_days.c.day.desc())
    .limit(sa.bindparam("limit"))
)
ENTRIES = (
    sa.select(usage_entries)
    .where(usage_entries.c.user_id == sa.bindparam("user_id"))
    .where(usage_entries.c.day >= sa.bindparam("since"))
    .where(usage_entries.c.day <= sa.bindparam("until"))
    # Pages go on from the last entry of the one before (-1 and "": from the first).
    .where(
        sa.or_(
            usage_entries.c.billed_at > sa.bindparam("after_at"),
            sa.and_(
                usage_entries.c.billed_at == sa.bindparam("after_at"),
                usage_entries.c.idempotency_key > sa.bindparam("after_key"),
            ),
        )
    )
    .order_by(usage_entries.c.billed_at, usage_entries.c.idempotency_key)
    .limit(sa.bindparam("limit"))
)


def _record_statements(dialect: Any) -> tuple[sa.Executable, sa.Executable]:
    """(insert the entry unless its key is there, add it to its day's totals), in the
    dialect's own spelling of ``ON CONFLICT``."""
    entry = dialect.insert(usage_entries).values(INSERT_VALUES)
    day = dialect.insert(usage_days).values(DAY_VALUES)
    added = {name: usage_days.c[name] + day.excluded[name] for name in SUMMED}
    return (
        # RETURNING says whether the row went in; the rowcount does not on every driver (on
        # PostgreSQL it came back -1 whether or not the row went in).
        entry.on_conflict_do_nothing(index_elements=[usage_entries.c.idempotency_key]).returning(
            usage_entries.c.idempotency_key
        ),
        day.on_conflict_do_update(
            index_elements=[usage_days.c.user_id, usage_days.c.day], set_=added
        ),
    )


RECORD = {"sqlite": _record_statements(sqlite), "postgresql": _record_statements(postgresql)}


@dataclass(frozen=True, slots=True)
class UsageEntry:
    """One run's bill as the ledger holds it."""

    idempotency_key: str
    run_id: str
    user_id: str
    stream: str
    day: str  # YYYY-MM-DD, UTC
    input_tokens: int
    output_tokens: int
    total_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost: float | None
    billed_at: float

    def as_json(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in fields(self)}


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """What a user's runs cost over some days (`day` set: over that one day)."""

    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost: float = 0.0
    day: str | None = None

    def as_json(self) -> dict[str, Any]:
        counts = {name: getattr(self, name) for name in SUMMED}
        return counts if self.day is None else {"day": self.day, **counts}


def utc_day(timestamp: float) -> str:
    return dt.datetime.fromtimestamp(timestamp, dt.UTC).date().isoformat()


def _count(value: object) -> int:
    """A token count goose reported; anything that is not a count is none."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return max(int(value), 0)


def entry_of(
    run: Any, usage: Mapping[str, Any], idempotency_key: str, user_id: str, now: float
) -> UsageEntry:
    """The entry of a run's bill (`run_usage`'s dict), on the UTC day the run ended."""
    ended = getattr(run, "finished_at", None) or getattr(run, "created_at", None) or now
    cost = usage.get("cost")
    known_cost = isinstance(cost, int | float) and not isinstance(cost, bool) and cost == cost
    return UsageEntry(
        idempotency_key=idempotency_key,
        run_id=str(run.run_id),
        user_id=user_id,
        stream=str(run.stream),
        day=utc_day(float(ended)),
        **{name: _count(usage.get(name)) for name in TOKENS},
        cost=float(cost) if known_cost else None,  # type: ignore[arg-type]
        billed_at=now,
    )


def _entry(row: Any) -> UsageEntry:
    return UsageEntry(**{field.name: getattr(row, field.name) for field in fields(UsageEntry)})


def _totals(row: Any, day: str | None = None) -> UsageTotals:
    counts = {name: int(getattr(row, name)) for name in ("runs", *TOKENS)}
    return UsageTotals(**counts, cost=float(row.cost), day=day)


def _range(user_id: str, since: str | None, until: str | None, limit: int) -> dict[str, Any]:
    return {"user_id": user_id, "since": since or EARLIEST, "until": until or LATEST,
            "limit": limit}  # fmt: skip


class UsageLedger:
    """:param log: the log whose database holds the ledger."""

    def __init__(self, log: EventLog) -> None:
        self.tables = log.tables

    def record(self, entry: UsageEntry) -> bool:
        """Record `entry` unless an entry with its key is recorded; True when this call did."""
        params = {f"e_{name}": getattr(entry, name) for name in TOKENS}
        params.update(
            e_key=entry.idempotency_key, e_run_id=entry.run_id, e_user_id=entry.user_id,
            e_stream=entry.stream, e_day=entry.day, e_cost=entry.cost,
            e_day_cost=entry.cost or 0.0, e_billed_at=entry.billed_at,
        )  # fmt: skip
        with self.tables.transaction() as conn:
            insert_entry, add_to_day = RECORD[conn.dialect.name]
            if conn.execute(insert_entry, params).first() is None:
                return False  # recorded before: its day has it already
            conn.execute(add_to_day, params)
        return True

    def totals(
        self, user_id: str, since: str | None = None, until: str | None = None
    ) -> UsageTotals:
        """The user's totals over the days from `since` to `until` (YYYY-MM-DD, both kept;
        None: no bound)."""
        return _totals(self.tables.select(TOTALS, _range(user_id, since, until, 0))[0])

    def days(
        self, user_id: str, since: str | None = None, until: str | None = None,
        limit: int = MAX_DAYS,
    ) -> list[UsageTotals]:  # fmt: skip
        """The user's totals of each day with a run, newest first, at most `limit`."""
        rows = self.tables.select(DAYS, _range(user_id, since, until, limit))
        return [_totals(row, row.day) for row in rows]

    def entries(
        self, user_id: str, since: str | None = None, until: str | None = None,
        limit: int = ENTRIES_PAGE, after: UsageEntry | None = None,
    ) -> list[UsageEntry]:  # fmt: skip
        """The user's entries in the order they were billed, at most `limit`, those after
        `after` (the last of the page before) when given."""
        params = _range(user_id, since, until, limit)
        params["after_at"] = -1.0 if after is None else after.billed_at
        params["after_key"] = "" if after is None else after.idempotency_key
        return [_entry(row) for row in self.tables.select(ENTRIES, params)]

    def all_entries(
        self, user_id: str, since: str | None = None, until: str | None = None
    ) -> Iterator[UsageEntry]:
        """Every entry of the user, as `entries` in pages: memory holds one page at a time."""
        after = None
        while True:
            page = self.entries(user_id, since, until, ENTRIES_PAGE, after)
            yield from page
            if len(page) < ENTRIES_PAGE:
                return
            after = page[-1]
