"""`TaskSet` keeps each task it started until the task ends (the loop itself keeps only a weak
reference), and lets go of it then."""

from __future__ import annotations

import asyncio

from gateway_kit.coordination.tasks import TaskSet
from tests.support.waiting import until


async def answer(value: str) -> str:
    return value


def test_a_started_task_is_kept_until_it_ends() -> None:
    async def main() -> None:
        tasks = TaskSet()
        release = asyncio.Event()
        task = tasks.start(release.wait(), name="waiting")
        other = tasks.start(answer("done"), name="quick")
        assert await other == "done"
        await until(lambda: list(tasks) == [task])
        release.set()
        assert await task is True
        await until(lambda: len(tasks) == 0)

    asyncio.run(main())
