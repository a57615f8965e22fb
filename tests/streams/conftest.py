"""Fixtures of the stream tests: a `Gateway` over the shared `log` fixture (every backend)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.log.postgres import conninfo
from gateway_kit.log.schema import NOTIFY_CHANNEL

MakeGateway = Callable[..., Gateway]
LISTENER_TIMEOUT = 10.0


@pytest.fixture
def log(log_url: str) -> Iterator[EventLog]:
    """The shared `log` fixture, with its cross-process listener running before the test.

    Every stream starts the log's listener. On PostgreSQL, a listener still connecting while
    the log closes leaves its connection open (reported to the log's owner); a test that ends
    within milliseconds would hit that window, so the listener is made to answer first.
    """
    event_log = EventLog(log_url)
    try:
        if log_url.startswith("postgresql"):
            _wait_for_listener(event_log, log_url)
        yield event_log
    finally:
        event_log.close()


def _wait_for_listener(event_log: EventLog, url: str) -> None:
    async def heard(seen: int) -> bool:
        return await event_log.wait_for_change(seen, 0.05)

    deadline = time.monotonic() + LISTENER_TIMEOUT
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        while time.monotonic() < deadline:
            seen = event_log.change_token
            conn.execute(f"NOTIFY {NOTIFY_CHANNEL}")
            if asyncio.run(heard(seen)):
                return
    raise RuntimeError("the log's listener never answered")


@pytest.fixture
def make_gateway(log: EventLog) -> MakeGateway:
    def make(app: Any = None, **options: Any) -> Gateway:
        return Gateway(app, log=log, **options)

    return make


@pytest.fixture
def gateway(make_gateway: MakeGateway) -> Gateway:
    return make_gateway()
