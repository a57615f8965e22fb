"""Appending data that arrived as JSON text, reading by type, and the log's own reads of the
tables beside it."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from gateway_kit import EventLog, InvalidEvent, PayloadTooLarge
from gateway_kit.log.transaction import compiled
from tests.support.waiting import settled


def test_data_json_is_stored_as_given_and_read_back_as_data(log: EventLog) -> None:
    text = '{"type":"Message","text":"caf\u00e9 \u2014 ok","n":[1,2]}'
    [event] = log.append_many([{"stream": "s", "type": "Message", "data_json": text}])
    [read] = log.read(settled=False)
    assert read.data_json == text == event.data_json
    assert read.data == json.loads(text)


def test_data_json_with_escapes_is_checked_like_data(log: EventLog) -> None:
    [event] = log.append_many([{"stream": "s", "type": "T", "data_json": '{"a":"\\u00e9"}'}])
    assert event.data == {"a": "é"}
    with pytest.raises(InvalidEvent, match="not valid Unicode"):
        log.append_many([{"stream": "s", "type": "T", "data_json": '{"a":"\\ud800"}'}])
    with pytest.raises(InvalidEvent, match="JSON text of an object"):
        log.append_many([{"stream": "s", "type": "T", "data_json": "[1, 2]"}])
    with pytest.raises(TypeError, match="not both"):
        log.append_many([{"stream": "s", "type": "T", "data": {}, "data_json": "{}"}])
    assert [e.seq for e in log.read(settled=False)] == [event.seq]  # nothing half written


def test_data_json_above_the_size_limit_is_refused(log_url: str) -> None:
    with EventLog(log_url, max_payload_bytes=100) as small:
        fits = '{"a":"' + "é" * 40 + '"}'  # 88 bytes: four characters per byte count would not
        small.append_many([{"stream": "s", "type": "T", "data_json": fits}])
        with pytest.raises(PayloadTooLarge):
            small.append_many(
                [{"stream": "s", "type": "T", "data_json": '{"a":"' + "x" * 99 + '"}'}]
            )
        assert len(small.read(settled=False)) == 1


def test_read_by_type_keeps_the_order_and_the_cursor(log: EventLog) -> None:
    for n, kind in enumerate(["A", "B", "A", "C", "B"]):
        log.append("s", kind, {"n": n}, run_id="r")
    settled(log)
    assert [e.data["n"] for e in log.read(run_id="r", types=["B", "C"])] == [1, 3, 4]
    second = log.read(run_id="r")[1].seq
    assert [e.data["n"] for e in log.read(after=second, types=("A",))] == [2]
    with pytest.raises(TypeError):
        log.read(types=[1])  # type: ignore[list-item]


def test_select_reads_the_tables_beside_the_log_on_its_own_connections(log: EventLog) -> None:
    with log.tables.transaction() as conn:
        conn.execute(sa.text("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"))
        conn.execute(sa.text("INSERT INTO notes (id, body) VALUES (1, 'one'), (2, 'two')"))
    notes = sa.table("notes", sa.column("id", sa.Integer), sa.column("body", sa.Text))
    by_id = sa.select(notes).where(notes.c.id == sa.bindparam("id"))
    [row] = log.tables.select(by_id, {"id": 2})
    assert (row.id, row.body) == (2, "two")
    assert log.tables.select(by_id, {"id": 3}) == []
    # A statement made once is compiled once per driver.
    assert compiled(by_id, "sqlite") is compiled(by_id, "sqlite")


def test_write_commits_a_statement_on_the_writer_and_leaves_nothing_when_it_fails(
    log: EventLog,
) -> None:
    with log.tables.transaction() as conn:
        conn.execute(sa.text("CREATE TABLE marks (id INTEGER PRIMARY KEY, body TEXT NOT NULL)"))
    marks = sa.table("marks", sa.column("id", sa.Integer), sa.column("body", sa.Text))
    insert = (
        sa.insert(marks)
        .values(id=sa.bindparam("id"), body=sa.bindparam("body"))
        .returning(marks.c.id)
    )
    assert log.tables.write(insert, {"id": 1, "body": "one"}).rows == [(1,)]
    # Committed: another connection sees it at once.
    with log.tables.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT body FROM marks")).scalars().all() == ["one"]
    with pytest.raises(sa.exc.IntegrityError):  # as SQLAlchemy says it, whichever way
        log.tables.write(insert, {"id": 1, "body": "again"})  # the same key: refused, rolled back
    update = sa.update(marks).where(marks.c.id == sa.bindparam("key")).values(body="uno")
    assert log.tables.write(update, {"key": 1}).rowcount == 1
    log.append("s", "T", {})  # the writer goes on appending after a refused write
    assert [r.body for r in log.tables.select(sa.select(marks))] == ["uno"]
    assert len(log.read(settled=False)) == 1
