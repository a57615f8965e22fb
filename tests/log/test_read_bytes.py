"""`EventLog.read(max_bytes=...)`: a page that ends with the event whose data brings it to the
cap, and cursors and limits no database integer holds refused before they reach the database."""

from __future__ import annotations

import pytest

from gateway_kit import EventLog, InvalidCursor
from gateway_kit.log.pages import data_size, may_continue
from tests.support.waiting import settled


def sized(log: EventLog, sizes: list[int], stream: str = "s", run_id: str | None = None) -> None:
    """Events of these data sizes, once a reader by cursor is given them."""
    for size in sizes:
        # "é" is two bytes in UTF-8: the cap counts bytes, not characters.
        log.append(stream, "T", {"t": "é" * (size // 2)}, run_id=run_id)
    settled(log)


def test_a_capped_read_ends_with_the_event_that_reaches_the_cap(log: EventLog) -> None:
    sized(log, [1000, 1000, 1000, 1000])
    sizes = [data_size(e) for e in log.read()]
    assert sizes[0] > 1000  # bytes, with the JSON around the text
    page = log.read(max_bytes=2 * sizes[0])
    assert [e.seq for e in page] == [1, 2]  # the second reaches the cap exactly
    assert may_continue(page, 1000, 2 * sizes[0])
    page = log.read(max_bytes=2 * sizes[0] + 1)
    assert [e.seq for e in page] == [1, 2, 3]  # the third is the one that reaches it
    assert [e.seq for e in log.read(after=1, max_bytes=1)] == [2]  # one, however large
    last = log.read(after=3, max_bytes=10**9)
    assert [e.seq for e in last] == [4] and not may_continue(last, 1000, 10**9)
    assert [e.seq for e in log.read(limit=2, max_bytes=10**9)] == [1, 2]


def test_a_capped_read_keeps_to_its_stream_and_run(log: EventLog) -> None:
    sized(log, [100, 100], stream="a", run_id="r1")
    sized(log, [5000], stream="b", run_id="r2")
    sized(log, [100], stream="a", run_id="r3")
    assert [e.seq for e in log.read(stream="a", max_bytes=10**6)] == [1, 2, 4]
    assert [e.seq for e in log.read(run_id="r1", max_bytes=10**6)] == [1, 2]
    assert [e.seq for e in log.read(after=2, stream="a", max_bytes=1)] == [4]


@pytest.mark.parametrize("max_bytes", [0, -1, 1.5, True, "10"])
def test_a_cap_that_is_not_a_positive_integer_is_refused(log: EventLog, max_bytes: object) -> None:
    with pytest.raises(InvalidCursor, match="max_bytes"):
        log.read(max_bytes=max_bytes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cursor",
    [2**63, 10**5000, "9" * 5000, "9223372036854775808", -(10**5000)],
    ids=["2**63", "10**5000", "5000-nines", "2**63-text", "-10**5000"],
)
def test_a_cursor_no_seq_can_be_is_refused_before_the_database(
    log: EventLog, cursor: object
) -> None:
    with pytest.raises(InvalidCursor, match="after"):
        log.read(after=cursor)  # type: ignore[arg-type]
    with pytest.raises(InvalidCursor, match="limit"):
        log.read(limit=2**63)


def test_a_cursor_of_thousands_of_leading_zeros_is_its_number(log: EventLog) -> None:
    sized(log, [10, 10])
    assert [e.seq for e in log.read(after="0" * 5000 + "1")] == [2]  # type: ignore[arg-type]
