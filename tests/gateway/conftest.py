"""Fixtures of the gateway tests: a log on SQLite (the gateway's composition does not depend on
the backend; the backends have tests of their own)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from gateway_kit import EventLog


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        yield event_log
