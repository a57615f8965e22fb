"""Bad input gets a clear exception and writes nothing."""

from __future__ import annotations

import datetime
import math
import types
from typing import Any

import pytest

from gateway_kit import EventLog, InvalidCursor, InvalidEvent, LogClosed, PayloadTooLarge
from tests.support.waiting import settled


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"stream": "", "type": "T"}, "stream must be a non-empty string"),
        ({"stream": None, "type": "T"}, "stream must be a non-empty string"),
        ({"stream": "s", "type": ""}, "type must be a non-empty string"),
        ({"stream": "s", "type": 3}, "type must be a non-empty string"),
        ({"stream": "s", "type": "T", "data": {"when": datetime.date(2026, 1, 1)}}, "JSON"),
        ({"stream": "s", "type": "T", "data": {"x": math.nan}}, "JSON"),
        ({"stream": "s", "type": "T", "data": {"x": {1, 2}}}, "JSON"),
        ({"stream": "s", "type": "T", "data": [1, 2]}, "JSON object"),
        ({"stream": "s", "type": "T", "data": {"x": "\ud800"}}, "Unicode"),
        ({"stream": "s\x00", "type": "T"}, "NUL"),
        ({"stream": "s", "type": "T", "run_id": ""}, "run_id must be a non-empty string"),
    ],
)
def test_bad_event_is_refused_and_nothing_written(
    log: EventLog, fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidEvent, match=message):
        log.append(**fields)
    assert log.read(settled=False) == []
    assert log.last_seq() == 0


def test_payload_above_the_limit_is_refused(log_url: str) -> None:
    with EventLog(log_url, max_payload_bytes=1000) as small:
        small.append("s", "T", {"x": "a" * 900})
        with pytest.raises(PayloadTooLarge, match="above the limit of 1000 bytes"):
            small.append("s", "T", {"x": "a" * 1000})
        assert len(small.read(settled=False)) == 1


def test_default_payload_limit_is_one_mebibyte(log: EventLog) -> None:
    log.append("s", "T", {"x": "a" * (1024 * 1024 - 100)})
    with pytest.raises(PayloadTooLarge):
        log.append("s", "T", {"x": "é" * (600 * 1024)})  # 1.2 MiB once encoded as UTF-8


def test_one_bad_event_fails_the_whole_batch(log: EventLog) -> None:
    with pytest.raises(InvalidEvent):
        log.append_many(
            [
                {"stream": "s", "type": "T"},
                {"stream": "s", "type": "T", "data": {"bad": object()}},
            ]
        )
    with pytest.raises(TypeError, match="unknown event fields: colour"):
        log.append_many([{"stream": "s", "type": "T", "colour": "red"}])
    assert log.read(settled=False) == []


@pytest.mark.parametrize("cursor", [-1, 1.5, "abc", "-3", None, True])
def test_bad_cursor_is_refused(log: EventLog, cursor: Any) -> None:
    with pytest.raises(InvalidCursor, match="non-negative integer"):
        log.read(after=cursor)


def test_digit_string_cursor_is_accepted(log: EventLog) -> None:
    log.append("s", "T")
    log.append("s", "T")
    settled(log)
    assert [e.pos for e in log.read(after="1")] == [2]


def test_closed_log_refuses_work(log_url: str) -> None:
    event_log = EventLog(log_url)
    event_log.close()
    with pytest.raises(LogClosed):
        event_log.append("s", "T")
    with pytest.raises(LogClosed):
        event_log.read()
    event_log.close()  # closing twice is harmless


def test_any_mapping_is_taken_as_data(log: EventLog) -> None:
    frozen = types.MappingProxyType({"text": "hi"})
    one = log.append("s", "Message", frozen)
    many = log.append_many([{"stream": "s", "type": "Message", "data": frozen}])
    assert one.data == many[0].data == {"text": "hi"}
