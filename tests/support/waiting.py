"""Waiting in tests for something another thread or process brings about."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sqlite3
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from gateway_kit import Event, EventLog

T = TypeVar("T")


def wait_until(
    condition: Callable[[], object],
    timeout: float = 10.0,
    *,
    failure: Callable[[], str] = lambda: "condition not met in time",
) -> None:
    """Until `condition()` is true, checking every 5 ms; fail after `timeout` seconds saying
    `failure()`."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(failure())
        time.sleep(0.005)


def settled(log: EventLog) -> None:
    """Until a reader by cursor is given every event of `log` committed so far: on
    PostgreSQL not while an older transaction runs anywhere on the server."""
    newest = log.latest()
    wait_until(lambda: newest is None or log.last_seq() >= newest.seq)


async def until(
    condition: Callable[[], object],
    timeout: float = 10.0,
    *,
    interval: float = 0.02,
    failure: Callable[[], str] = lambda: "condition not met in time",
) -> None:
    """`wait_until` for a coroutine: checks every `interval`, fails at the deadline saying
    `failure()`. `condition` may be a coroutine function (a check over HTTP)."""
    deadline = time.monotonic() + timeout
    while True:
        met = condition()
        if inspect.isawaitable(met):
            met = await met
        if met:
            return
        if time.monotonic() > deadline:
            raise AssertionError(failure())
        await asyncio.sleep(interval)


class Reads:
    """The reads `log.aread` answers from now on, as they return: a test waits for a tail to
    have looked and found nothing (it then waits for a wake-up) instead of sleeping."""

    def __init__(self, log: EventLog) -> None:
        self.answers: list[tuple[bool, list[Event]]] = []  # (settled, the events given)
        read = log.aread

        async def reading(*args: Any, **kwargs: Any) -> list[Event]:
            events = await read(*args, **kwargs)
            self.answers.append((kwargs.get("settled", True), events))
            return events

        log.aread = reading  # type: ignore[method-assign]

    async def found_nothing(self, since: int = 0, timeout: float = 10.0) -> None:
        """Until a reader by cursor, among the reads after the first `since`, was given
        nothing."""
        await until(
            lambda: any(settled and not events for settled, events in self.answers[since:]),
            timeout,
            interval=0.005,
            failure=lambda: f"no read found nothing in time; reads: {self.answers[since:]}",
        )


def answered_while_another_writes(
    sqlite_url: str, call: Callable[[], T], timeout: float = 10.0
) -> T:
    """What `call()` answers while another connection holds the write lock of the SQLite
    database at `sqlite_url`; fails when it is still waiting after `timeout` seconds (the busy
    timeout is a minute), and raises what `call()` raised."""
    writer = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    answers: list[T] = []
    errors: list[BaseException] = []

    def calling() -> None:
        try:
            answers.append(call())
        except BaseException as exc:
            errors.append(exc)

    try:
        writer.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
        thread = threading.Thread(target=calling)
        thread.start()
        thread.join(timeout)
        if errors:
            raise errors[0]
        assert answers, "the call waited for another connection's write lock"
        return answers[0]
    finally:
        with contextlib.suppress(sqlite3.Error):
            writer.execute("ROLLBACK")
        writer.close()
