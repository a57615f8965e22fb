"""Reads capped by bytes: a page of events that stops once their data reaches a size.

A page capped at `max_bytes` holds the events after the cursor in seq order, at most `limit` of
them, and none after the one that brings the size of their data (the UTF-8 bytes of the stored
JSON text) to `max_bytes` or beyond. So it always holds at least one event, however large, and
at most `max_bytes` plus one event. The database stops there itself: the rows past the cap are
never sent to the process, whose memory then follows bytes, not counts.

- PostgreSQL: a running sum over ``octet_length(data)`` of the candidate rows picks the seqs,
  then only those rows are fetched. PostgreSQL answers the length of a TOASTed value from its
  header, without reading the value.
- SQLite: the plain query's rows are stepped one at a time (SQLite computes each row when it is
  asked for) and the stepping stops at the cap, so a page costs what a plain read of its rows
  costs. SQLite (3.40) reads a text value to measure it, so a running sum in SQL would read
  every candidate, up to `limit` values of the largest size, for each page.

`may_continue` tells whether a page may have been cut by its cap, so more may follow it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .event import Event
from .schema import COLUMNS, EVENTS

SIZE_SQL = {"postgresql": "octet_length(data)"}
Row = Any  # a row of an events query, in COLUMNS order


def data_size(event: Event) -> int:
    """The bytes of an event's data as the database measures them (UTF-8)."""
    text = event.data_json
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def may_continue(page: Sequence[Event], limit: int, max_bytes: int | None) -> bool:
    """Whether a read of `limit` events capped at `max_bytes` that gave `page` may have left
    events behind it: it is full, or its data reached the cap."""
    if len(page) >= limit:
        return True
    return max_bytes is not None and sum(map(data_size, page)) >= max_bytes


def _filters(stream: str | None, run_id: str | None, types: tuple[str, ...], ph: str) -> str:
    where = ""
    if stream is not None:
        where += f" AND stream = {ph}"
    if run_id is not None:
        where += f" AND run_id = {ph}"
    if types:
        where += f" AND type IN ({', '.join([ph] * len(types))})"
    return where


def capped_sql_postgres(
    stream: str | None, run_id: str | None, settled: str, types: tuple[str, ...] = ()
) -> str:
    """Params: after, the filters' values, limit, max_bytes."""
    size = SIZE_SQL["postgresql"]
    candidates = (
        f"SELECT seq, {size} AS size FROM {EVENTS} "
        f"WHERE seq > %s AND {settled}{_filters(stream, run_id, types, '%s')} "
        f"ORDER BY seq LIMIT %s"
    )
    running = (
        "SELECT seq, SUM(size) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - size AS before "
        f"FROM ({candidates}) AS candidates"
    )
    picked = f"SELECT seq FROM ({running}) AS running WHERE before < %s"
    return f"SELECT {COLUMNS} FROM {EVENTS} WHERE seq IN ({picked}) ORDER BY seq"


def capped_rows(rows: Iterable[Row], max_bytes: int) -> list[Row]:
    """The rows of a cursor stepped one at a time, up to the one whose data (column 5, as in
    every events query) brings their size to `max_bytes`: the rest are never computed."""
    page: list[Row] = []
    total = 0
    for row in rows:
        page.append(row)
        text = row[5]
        total += len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        if total >= max_bytes:
            break
    return page


def filter_params(stream: str | None, run_id: str | None, types: tuple[str, ...]) -> list[object]:
    params: list[object] = []
    if stream is not None:
        params.append(stream)
    if run_id is not None:
        params.append(run_id)
    params.extend(types)
    return params
