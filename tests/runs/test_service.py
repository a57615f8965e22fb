"""Starting runs when the run table lags behind the log."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit import RunConflict, RunStatus
from gateway_kit.testing import Turn

from ..upstream.harness import STREAM, harness


def test_a_run_the_log_already_ended_does_not_block_the_next_one(log_url: str) -> None:
    """The process that appended a run's Finish died before recording it."""

    async def main() -> None:
        async with harness(log_url) as h:
            h.runs.pumps.ensure = lambda session_id: None  # type: ignore[method-assign]
            h.fake.script(h.session_id, Turn().hang(), Turn().text("next"))
            first = await h.runs.start(STREAM, "one")
            with pytest.raises(RunConflict):
                await h.runs.start(STREAM, "two")
            h.log.append(
                STREAM, "Finish", {"type": "Finish", "reason": "stop"}, run_id=first.run_id
            )
            await h.upstream.cancel(h.session_id, first.upstream_request_id)
            second = await h.runs.start(STREAM, "two")
            ended = h.store.get(first.run_id)
            assert ended is not None and ended.status is RunStatus.FINISHED
            assert h.store.active_run(STREAM) == second

    asyncio.run(main())
