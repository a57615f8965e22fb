"""`Periodic` does its work now and every interval until stopped: a failed round is logged and
the next one comes, a database outage is logged once and its end too, a closed log ends it."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest

from gateway_kit.coordination.periodic import BACK, UNAVAILABLE, Periodic
from gateway_kit.exceptions import DatabaseUnavailable, LogClosed
from tests.support.waiting import until

INTERVAL = 0.05
NAME = "sweeping"


def test_work_runs_at_once_then_every_interval_until_stopped() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        rounds: list[float] = []

        async def work() -> None:
            rounds.append(loop.time())

        periodic = Periodic(work, INTERVAL, NAME)
        started = loop.time()
        periodic.start()
        periodic.start()  # already running in this loop: still one task
        await until(lambda: rounds)
        assert rounds[0] - started < INTERVAL  # the first round is not an interval away
        await until(lambda: len(rounds) >= 3)
        assert [t.get_name() for t in asyncio.all_tasks()].count(NAME) == 1
        await periodic.stop()
        assert not periodic.running
        assert all(b - a >= INTERVAL * 0.9 for a, b in itertools.pairwise(rounds))

    asyncio.run(main())


def test_a_failed_round_is_logged_and_the_next_one_comes(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        rounds: list[int] = []

        async def work() -> None:
            rounds.append(len(rounds))
            if len(rounds) == 1:
                raise RuntimeError("a row it could not read")

        periodic = Periodic(work, INTERVAL, NAME)
        periodic.start()
        await until(lambda: len(rounds) >= 2)
        await periodic.stop()

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    [record] = [r for r in caplog.records if r.getMessage().startswith(NAME)]
    assert record.getMessage() == f"{NAME} failed; trying again in {INTERVAL:g} s"
    assert record.exc_info is not None and "a row it could not read" in str(record.exc_info[1])


def test_a_database_outage_is_logged_once_and_its_end_too(caplog: pytest.LogCaptureFixture) -> None:
    async def main() -> None:
        outage = [DatabaseUnavailable("connection refused")] * 3
        rounds: list[int] = []

        async def work() -> None:
            rounds.append(len(rounds))
            if outage:
                raise outage.pop()

        periodic = Periodic(work, INTERVAL, NAME)
        periodic.start()
        await until(lambda: len(rounds) >= 5)
        await periodic.stop()

    with caplog.at_level(logging.INFO):
        asyncio.run(main())
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith(NAME)] == [
        UNAVAILABLE % (NAME, "connection refused"),
        BACK % NAME,
    ]


def test_a_closed_log_ends_the_rounds() -> None:
    async def main() -> None:
        async def work() -> None:
            raise LogClosed("closed")

        periodic = Periodic(work, INTERVAL, NAME)
        periodic.start()
        await until(lambda: not periodic.running)
        await periodic.stop()

    asyncio.run(main())
