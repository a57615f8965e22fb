"""Starting runs when the run table lags behind the log."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit import RunConflict, RunStatus
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.testing import Turn
from tests.support.upstream import STREAM, harness


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


def test_a_claim_overtaken_before_the_run_is_recorded_is_decided_again(log_url: str) -> None:
    """Between `admit` finding the stream free and the run's record, the app declared its
    owner: the claim is not made, no run is recorded, and `admit` decides again."""

    async def main() -> None:
        async with harness(log_url) as h:
            asked: list[str] = []

            async def admit(stream: str) -> str | None:
                asked.append(stream)
                if len(asked) == 1:
                    StreamOwners(h.log).declare(stream, "alice")  # her app, meanwhile
                    return "bob"
                raise PermissionError("the stream is alice's")

            before = len(h.log.read(stream=STREAM, settled=False))
            with pytest.raises(PermissionError):
                await h.runs.start(STREAM, "mine now", admit=admit)
            assert asked == [STREAM, STREAM]
            assert h.store.active_run(STREAM) is None
            assert len(h.log.read(stream=STREAM, settled=False)) == before
            assert StreamOwners(h.log).owner(STREAM) == "alice"
            assert h.fake.reply_calls == []

    asyncio.run(main())
