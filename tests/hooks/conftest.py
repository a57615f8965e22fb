"""Fixtures of the hook tests: an empty log on SQLite, which a test module may replace with one
holding the streams it asks about."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway_kit import EventLog


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        yield event_log
