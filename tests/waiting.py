"""Waiting in tests for something another thread or process brings about."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable


def wait_until(condition: Callable[[], object], timeout: float = 10.0) -> None:
    """Until `condition()` is true, checking every 5 ms; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


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
