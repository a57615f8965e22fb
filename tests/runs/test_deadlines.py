"""Runs that goose leaves hanging: a reply it never answers, a cancel it ignores, a run that
never ends. The gateway bounds each and ends the run itself."""

from __future__ import annotations

import asyncio

import pytest

from gateway_kit import EventLog, Gateway, GatewaySettings, GooseUpstream
from gateway_kit.runs.lifecycle import RunLifecycle
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.runs.model import Run, RunStatus
from gateway_kit.testing import FakeGoose, Turn
from gateway_kit.types import Receive, Scope, Send
from tests.runs.plugins import Ledger
from tests.support.runs import bound_session, gateway_client, start_run, wait_status
from tests.support.upstream import STREAM, Harness, harness
from tests.support.waiting import until


class HangingReplyGoose(FakeGoose):
    """Never answers `POST /sessions/{id}/reply` while `hang` is set."""

    def __init__(self, **options: object) -> None:
        super().__init__(**options)  # type: ignore[arg-type]
        self.hang = True
        self.hung: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.hang and scope["type"] == "http" and scope["path"].endswith("/reply"):
            self.hung.append(scope["path"])
            await asyncio.Event().wait()
        await super().__call__(scope, receive, send)


def test_a_reply_goose_never_answers_is_a_504_within_the_bound_and_leaves_nothing_active(
    log_url: str,
) -> None:
    async def main() -> None:
        fake = HangingReplyGoose(ping_interval=0.05)
        async with gateway_client(
            log_url, fake, settings=GatewaySettings(lifecycle=LifecycleSettings(reply_timeout=0.5))
        ) as (client, gateway, log):
            bound_session(fake, gateway)
            loop = asyncio.get_running_loop()
            posted = loop.time()
            # Generous, and far below the 60 s an unbounded reply waited.
            answer = await asyncio.wait_for(
                client.post("/gateway/streams/conv/runs", json={"message": "hi"}), 10
            )
            took = loop.time() - posted
            assert len(fake.hung) == 1
            assert answer.status_code == 504, answer.text
            assert answer.json()["error"] == "upstream_timeout"
            assert "did not answer" in answer.json()["message"]
            assert took < 0.5 + 2.0, took
            [run_id] = {e.run_id for e in log.read(stream="conv")}
            written = log.read(run_id=run_id, settled=False)
            assert [e.type for e in written] == ["RunStarted", "Error"]
            assert (await client.get(f"/gateway/runs/{run_id}")).json()["status"] == "failed"
            assert gateway.pumps is not None
            assert gateway.pumps.store.active_run("conv") is None
            # goose may have taken the request after all: it is told to drop it
            assert gateway.runs is not None
            await until(lambda: cancelled(fake, gateway.runs.store.get(run_id)))
            fake.hang = False
            second = await start_run(client, "again")  # the stream is free
            await wait_status(client, second, "finished")

    asyncio.run(main())


def cancelled(fake: FakeGoose, run: Run | None) -> bool:
    """Whether goose was asked to cancel the run's current request."""
    assert run is not None
    return any(call.request_id == run.upstream_request_id for call in fake.cancel_calls)


async def ends_once(h: Harness, run: Run, ledger: Ledger) -> Run:
    """The run, once ended; its end and its bill came once."""
    run = await h.finished(run)
    assert [e.type for e in h.events(run)].count(run_end_type(h, run)) == 1
    await h.runs.lifecycle.billing.wait_idle()
    await until(lambda: len(ledger.calls) == 1)
    assert [bill.run_id for bill in h.store.bills()] == [run.run_id]
    return run


def run_end_type(h: Harness, run: Run) -> str:
    end = h.log.run_end(run.run_id)
    assert end is not None
    return end.type


async def next_run_finishes(h: Harness) -> None:
    """The stream takes a new run, which goose answers and finishes."""
    second = await h.finished(await h.runs.start(STREAM, "again"))
    assert second.status is RunStatus.FINISHED


def ignores_cancel() -> Turn:
    """goose frees the session at a cancel, but this turn's task never sends its Finish."""
    return Turn().text("thinking").hang().hold_finish(asyncio.Event())


async def started(h: Harness, stream: str) -> Run:
    """A run of `stream` whose first goose event is in the log: its pump saw goose list it."""
    run = await h.runs.start(stream, "go")
    await until(lambda: "Message" in [e.type for e in h.log.read(run_id=run.run_id)])
    return run


def test_a_cancel_goose_ignores_ends_the_run_at_the_cancel_deadline(log_url: str) -> None:
    ledger = Ledger()
    limits = LifecycleSettings(cancel_deadline=0.5)

    async def main() -> None:
        async with harness(log_url, plugins=[ledger], lifecycle_settings=limits) as h:
            await h.runs.lifecycle.start()
            h.fake.script(h.session_id, ignores_cancel())
            run = await started(h, STREAM)
            loop = asyncio.get_running_loop()
            asked = loop.time()
            await h.runs.cancel(run.run_id)
            run = await ends_once(h, run, ledger)
            took = loop.time() - asked
            assert run.status is RunStatus.CANCELLED
            end = h.log.run_end(run.run_id)
            assert end is not None and end.type == "Finish"
            assert end.data["reason"] == "cancelled"
            assert "did not finish the run within 0.5 s of its cancel" in end.data["message"]
            assert 0.5 <= took < 0.5 + 3.0, took
            await next_run_finishes(h)

    asyncio.run(main())


def test_a_run_past_max_run_duration_is_cancelled_at_goose_and_ends_with_an_error(
    log_url: str,
) -> None:
    ledger = Ledger()
    limits = LifecycleSettings(max_run_duration=1.0)

    async def main() -> None:
        async with harness(log_url, plugins=[ledger], lifecycle_settings=limits) as h:
            await h.runs.lifecycle.start()
            h.fake.script(h.session_id, Turn().text("thinking").hang())
            run = await started(h, STREAM)
            run = await ends_once(h, run, ledger)
            assert run.status is RunStatus.FAILED
            end = h.log.run_end(run.run_id)
            assert end is not None and end.type == "Error"
            assert "longer than max_run_duration (1 s)" in end.data["error"]
            assert run.finished_at is not None and run.finished_at - run.created_at < 1.0 + 3.0
            await until(lambda: cancelled(h.fake, run))
            await next_run_finishes(h)

    asyncio.run(main())


def test_deadlines_hold_across_a_restart_from_the_times_stored(log_url: str) -> None:
    """The process that started and cancelled the runs is gone; another one ends them."""

    async def main() -> None:
        async with harness(log_url) as h:
            h.fake.script(h.session_id, ignores_cancel())
            cancelled_run = await started(h, STREAM)
            await h.runs.cancel(cancelled_run.run_id)
            other = h.fake.create_session()
            h.store.bind("conv-2", other)
            h.fake.script(other, Turn().text("thinking").hang())
            long_run = await started(h, "conv-2")
            await h.runs.pumps.stop()  # this process dies: it never ran a deadline
            limits = LifecycleSettings(cancel_deadline=0.5, max_run_duration=1.5)
            later = RunLifecycle(
                log=h.log, store=h.store, upstream=h.upstream, plugins=h.plugins, settings=limits
            )
            await later.start()
            try:
                ended = [await h.finished(cancelled_run), await h.finished(long_run)]
            finally:
                await later.stop()
            assert [run.status for run in ended] == [RunStatus.CANCELLED, RunStatus.FAILED]

    asyncio.run(main())


def test_the_gateway_settings_set_the_lifecycle_limits(sqlite_url: str) -> None:
    with EventLog(sqlite_url) as log:
        upstream = GooseUpstream(secret_key="s")
        mine = LifecycleSettings(max_follow_ups=0, cancel_deadline=7.0, max_run_duration=60.0)
        gateway = Gateway(log=log, upstream=upstream, allow_anonymous=True,
                          settings=GatewaySettings(lifecycle=mine))  # fmt: skip
        assert gateway.lifecycle is not None
        settings = gateway.lifecycle.settings
        assert (settings.max_follow_ups, settings.cancel_deadline) == (0, 7.0)
        assert (settings.max_run_duration, settings.reply_timeout) == (60.0, 15.0)


def test_lifecycle_limits_that_cannot_work_are_refused() -> None:
    for name, value in (
        ("reply_timeout", 0),
        ("cancel_deadline", float("nan")),
        ("max_run_duration", -5),
        ("max_run_duration", None),
    ):
        with pytest.raises(ValueError, match=name):
            LifecycleSettings(**{name: value})  # type: ignore[arg-type]
    assert LifecycleSettings(max_run_duration=float("inf")).max_run_duration == float("inf")
