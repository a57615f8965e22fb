"""A new run of a stream whose goose session still holds a request the gateway is done with:
goose answers 400 "Session already has an active request" to the start's `reply`. The start
asks goose to drop the request of the run before and sends the reply again, for at most
`LifecycleSettings.busy_wait` seconds; past that the start is refused as before."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit import LifecycleSettings
from gateway_kit.exceptions import RunConflict
from gateway_kit.testing import Turn
from tests.support.upstream import STREAM, Harness, harness

REFUSED = 400


def refused_replies(h: Harness, request_id: str) -> int:
    return sum(1 for c in h.fake.reply_calls if c.request_id == request_id and c.status == REFUSED)


async def cancelled_run(h: Harness) -> None:
    """A run cancelled and ended, whose request goose has not let go of."""
    h.fake.script(h.session_id, Turn().hang())
    first = await h.runs.start(STREAM, "go")
    await h.runs.cancel(first.run_id)
    await h.finished(first)
    assert h.fake.reply_calls[-1].status == 200


def test_a_start_right_after_a_cancel_waits_until_goose_lets_the_session_go(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            release = h.fake.hold_cancelled(h.session_id)
            await cancelled_run(h)
            starting = asyncio.create_task(h.runs.start(STREAM, "next"))
            await h.until(lambda: REFUSED in [c.status for c in h.fake.reply_calls])
            assert not starting.done()  # refused once: it tries again, it does not give up
            release.set()
            nxt = await starting
            assert refused_replies(h, nxt.upstream_request_id) >= 1
            assert (await h.finished(nxt)).status.value == "finished"

    asyncio.run(main())


def test_the_next_start_drops_the_request_of_a_run_the_log_ended_while_goose_went_on(
    log_url: str,
) -> None:
    """The log ends the run (another process wrote its end) while goose still works on its
    request, and nobody cancels it: the next run of the stream still starts."""

    async def main() -> None:
        async with harness(log_url) as h:
            h.fake.script(h.session_id, Turn().hang())
            run = await h.runs.start(STREAM, "go")
            h.log.append(STREAM, "Error", {"error": "ended elsewhere"}, run_id=run.run_id)
            assert h.fake.active_request_ids(h.session_id) == [run.upstream_request_id]
            nxt = await h.runs.start(STREAM, "next")
            assert run.upstream_request_id in [c.request_id for c in h.fake.cancel_calls]
            assert (await h.finished(nxt)).status.value == "finished"
            assert h.store.get(run.run_id).status.value == "failed"  # type: ignore[union-attr]

    asyncio.run(main())


def test_a_session_that_stays_busy_past_busy_wait_refuses_the_start(log_url: str) -> None:
    settings = LifecycleSettings(busy_wait=0.3)

    async def main() -> None:
        async with harness(log_url, lifecycle_settings=settings) as h:
            h.fake.hold_cancelled(h.session_id)  # never let go
            await cancelled_run(h)
            with pytest.raises(RunConflict, match="Session already has an active request"):
                await h.runs.start(STREAM, "next")
            refused = h.store.latest_ended_run(h.session_id)
            assert refused is not None and refused.message == "next"
            assert refused.status.value == "failed"  # the stream is not held by it
            assert refused_replies(h, refused.upstream_request_id) >= 2  # it tried again
            assert h.store.active_run(STREAM) is None

    asyncio.run(main())


def test_a_start_cancelled_while_the_session_is_busy_never_reaches_goose(log_url: str) -> None:
    async def main() -> None:
        async with harness(log_url) as h:
            release = h.fake.hold_cancelled(h.session_id)
            await cancelled_run(h)
            starting = asyncio.create_task(h.runs.start(STREAM, "next"))
            await h.until(lambda: REFUSED in [c.status for c in h.fake.reply_calls])
            nxt = h.store.active_run(STREAM)
            assert nxt is not None and nxt.message == "next"
            await h.runs.cancel(nxt.run_id)
            with pytest.raises(RunConflict):
                await starting
            release.set()
            taken = [c for c in h.fake.reply_calls if c.request_id == nxt.upstream_request_id]
            assert [c.status for c in taken if c.status != REFUSED] == []
            assert h.store.active_run(STREAM) is None

    asyncio.run(main())
