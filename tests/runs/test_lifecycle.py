"""The run lifecycle: finish guards, recoveries and billing decide when a run ends.

Through the fake goose and respx, with the gateway's HTTP API as a client sees it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from gateway_kit import Event, GatewaySettings, GuardVeto, RecoveryPlan
from gateway_kit.runs.billing import BillingSettings
from gateway_kit.runs.bills import idempotency_key
from gateway_kit.runs.lifecycle_settings import LifecycleSettings
from gateway_kit.testing import TEXT_ONLY_MODEL_ERROR, FakeGoose, Turn
from tests.support.plugins import plugin
from tests.support.runs import (
    bound_session,
    cancel_of,
    gateway_client,
    reply_of,
    run_types,
    sse_events,
    start_run,
    terminal_count,
    wait_status,
)
from tests.support.upstream import harness, until

from .plugins import MISSING_FILE, Ledger, Recoveries, VetoOnce


def test_a_guard_that_vetoes_once_gets_one_follow_up_naming_the_missing_item(
    log_url: str,
) -> None:
    guard = VetoOnce()

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        release = asyncio.Event()
        async with gateway_client(log_url, fake, plugins=[guard]) as (client, gateway, log):
            session = bound_session(
                fake,
                gateway,
                Turn().text("I wrote the report."),
                Turn().pause(release).text("Now it is really written."),
            )
            run_id = await start_run(client, "write the report")
            following = asyncio.create_task(client.get(f"/gateway/runs/{run_id}/events"))
            await until(lambda: len(fake.reply_calls) == 2)  # the follow-up went to goose
            # Until the run's own end, the legacy poll says running.
            poll = (await client.get(f"/api/tasks/{run_id}")).json()
            assert poll["status"] == "running"
            release.set()
            await wait_status(client, run_id, "finished")
            received = sse_events((await following).text)
            poll = (await client.get(f"/api/tasks/{run_id}")).json()
            shown = (await client.get(f"/gateway/runs/{run_id}")).json()
            events = log.read(run_id=run_id)

        follow_up = fake.reply_calls[1]
        assert follow_up.session_id == session  # the same goose session
        prompt = follow_up.user_message["content"][0]["text"]
        assert "the report was not written" in prompt and f"- {MISSING_FILE}" in prompt
        types = run_types(received)
        assert types == run_types(events)  # the follower saw the whole run
        assert types.count("UpstreamFinish") == 2 and types.index("FollowUpStarted") < len(types)
        assert terminal_count(types) == 1 and types[-1] == "Finish"
        texts = [
            e["data"]["message"]["content"][0]["text"] for e in received if e["type"] == "Message"
        ]
        assert texts == ["I wrote the report.", "Now it is really written."]
        assert poll["status"] == "completed"
        kinds = [a["kind"] for a in shown["attempts"]]
        assert kinds == ["initial", "follow_up"] and shown["attempt"] == 2
        request_ids = [a["upstream_request_id"] for a in shown["attempts"]]
        assert request_ids == [call.request_id for call in fake.reply_calls]
        assert len(set(request_ids)) == 2
        assert shown["terminal_seq"] == events[-1].seq
        # The guard was asked after each goose Finish, the second time with both turns.
        assert len(guard.calls) == 2 and guard.calls[1].count("UpstreamFinish") == 2

    asyncio.run(main())


def test_an_upstream_failure_of_a_replaced_attempt_does_not_end_the_run(log_url: str) -> None:
    """The pump may find the first request lost (goose no longer lists it) just as a guard's
    follow-up replaces it: that failure is about a request nobody waits for any more."""
    guard = VetoOnce()

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        release = asyncio.Event()
        async with gateway_client(log_url, fake, plugins=[guard]) as (client, gateway, _):
            bound_session(fake, gateway, Turn().text("a"), Turn().pause(release).text("b"))
            run_id = await start_run(client, "go")
            await until(lambda: len(fake.reply_calls) == 2)  # the follow-up went to goose
            following = gateway.pumps.store.get(run_id)  # type: ignore[union-attr]
            assert following is not None and following.attempt == 2
            first = replace(
                following, attempt=1, upstream_request_id=fake.reply_calls[0].request_id
            )
            await gateway.lifecycle.upstream_failed(first, "goose no longer knows it")  # type: ignore[union-attr]
            assert (await client.get(f"/gateway/runs/{run_id}")).json()["status"] == "active"
            release.set()
            await wait_status(client, run_id, "finished")

    asyncio.run(main())


def test_a_guard_that_always_vetoes_gets_n_follow_ups_then_guard_failed_and_finish(
    log_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    def never_done(run: Any, events: list[Event]) -> GuardVeto:
        return GuardVeto("the tests were not run", missing=["pytest output"])

    async def main() -> tuple[list[Event], dict[str, Any]]:
        fake = FakeGoose(ping_interval=0.05)
        settings = LifecycleSettings(max_follow_ups=3)
        guards = [plugin("never-done", finish_guard=never_done)]
        async with gateway_client(
            log_url, fake, plugins=guards, settings=GatewaySettings(lifecycle=settings)
        ) as (
            client,
            _,
            log,
        ):
            run_id = await start_run(client, "run the tests")
            shown = await wait_status(client, run_id, "finished")
            return log.read(run_id=run_id), shown

    with caplog.at_level(logging.WARNING, logger="gateway_kit.runs"):
        events, shown = asyncio.run(main())
    types = run_types(events)
    assert types.count("FollowUpStarted") == 3 and types.count("UpstreamFinish") == 4, " ".join(
        types
    )
    assert types[-2:] == ["guard_failed", "Finish"] and terminal_count(types) == 1, " ".join(types)
    failed = events[-2].data
    assert failed["reasons"] == ["the tests were not run"]
    assert failed["missing"] == ["pytest output"] and failed["follow_ups"] == 3
    assert shown["attempt"] == 4
    # Whoever reads only the end sees that the guards gave up.
    assert events[-1].data["guard_failed"] is True and shown["guard_failed"] is True
    assert any("still vetoed" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")


def test_a_classified_error_recovers_in_a_clean_session_then_finishes(log_url: str) -> None:
    context = [{"role": "user", "content": [{"type": "text", "text": "summary so far"}]}]
    plan = RecoveryPlan(
        "visual_fallback",
        clean_session=True,
        context=context,
        instructions="describe the image in words instead",
        tool_policy=[{"name": "developer", "enabled": False}],
    )
    planner = Recoveries([plan])

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[planner]) as (client, gateway, log):
            old = bound_session(fake, gateway, Turn().read_image().error(TEXT_ONLY_MODEL_ERROR))
            run_id = await start_run(client, "look at the screenshot")
            shown = await wait_status(client, run_id, "finished")
            events = log.read(run_id=run_id)
            binding = gateway.pumps.store.binding("conv")  # type: ignore[union-attr]
            # The conversation now lives in the clean session: the next run goes there.
            second = await start_run(client, "and now?")
            await wait_status(client, second, "finished")

        first, retry = fake.reply_calls[0], fake.reply_calls[1]
        assert first.session_id == old and retry.session_id != old
        assert binding is not None and binding.session_id == retry.session_id
        assert fake.reply_calls[2].session_id == retry.session_id
        assert retry.user_message["content"][0]["text"] == "describe the image in words instead"
        assert retry.body["override_conversation"] == context
        start = [r for r in fake.requests if r.path == "/agent/start"]
        assert b'"extension_overrides":[{"name":"developer","enabled":false}]' in start[-1].body
        # The failed request was cancelled before the retry was sent.
        assert [c.request_id for c in fake.cancel_calls][:1] == [first.request_id]
        assert fake.requests.index(cancel_of(fake, first.request_id)) < fake.requests.index(
            reply_of(fake, retry.request_id)
        )
        types = run_types(events)
        assert "UpstreamError" in types and "RecoveryStarted" in types
        assert terminal_count(types) == 1 and types[-1] == "Finish"
        assert [a["kind"] for a in shown["attempts"]] == ["initial", "recovery"]
        assert shown["attempts"][1]["recovery"] == "visual_fallback"
        assert shown["attempts"][1]["session_id"] == retry.session_id
        assert planner.planned == [("SESSION_VISUAL_CONTEXT_UNSUPPORTED", 1)]

    asyncio.run(main())


def test_each_recovery_kind_runs_once_and_two_kinds_never_share_a_budget(log_url: str) -> None:
    tool_history = RecoveryPlan("tool_history", instructions="retry without the tool history")
    visual = RecoveryPlan("visual_fallback", instructions="retry without images")
    # The planner answers tool_history, then visual_fallback, then tool_history again.
    planner = Recoveries([tool_history, visual, tool_history])

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[planner]) as (client, gateway, log):
            failing = Turn().error(TEXT_ONLY_MODEL_ERROR)
            session = bound_session(fake, gateway, failing, failing, failing)
            run_id = await start_run(client, "look")
            shown = await wait_status(client, run_id, "failed")
            events = log.read(run_id=run_id)

        assert [a["recovery"] for a in shown["attempts"]] == [
            None,
            "tool_history",
            "visual_fallback",
        ]
        assert all(call.session_id == session for call in fake.reply_calls)
        assert len(fake.reply_calls) == 3  # the third plan was refused: its kind was spent
        assert [c.status for c in fake.reply_calls] == [200, 200, 200]  # never "busy"
        # Before every retry the request before it was cancelled.
        for previous, retry in zip(fake.reply_calls, fake.reply_calls[1:], strict=False):
            assert fake.requests.index(cancel_of(fake, previous.request_id)) < (
                fake.requests.index(reply_of(fake, retry.request_id))
            )
        types = run_types(events)
        assert types.count("RecoveryStarted") == 2 and terminal_count(types) == 1
        end = types.index("Error")
        # Only goose's late Finish of the failed request may follow the run's end.
        assert set(types[end + 1 :]) <= {"UpstreamFinish"}
        assert events[end].data["error"] == TEXT_ONLY_MODEL_ERROR
        assert events[end].data["error_class"] == "SESSION_VISUAL_CONTEXT_UNSUPPORTED"
        assert planner.planned == [
            ("SESSION_VISUAL_CONTEXT_UNSUPPORTED", 1),
            ("SESSION_VISUAL_CONTEXT_UNSUPPORTED", 2),
            ("SESSION_VISUAL_CONTEXT_UNSUPPORTED", 3),
        ]

    asyncio.run(main())


def test_an_unclassified_error_ends_the_run_with_its_error(log_url: str) -> None:
    planner = Recoveries([RecoveryPlan("never")])

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=[planner]) as (client, gateway, log):
            bound_session(fake, gateway, Turn().text("hm").error("rate limited"))
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "failed")
            end = log.run_end(run_id)
            assert end is not None and end.type == "Error" and end.data["error"] == "rate limited"
            assert end.data["error_class"] is None
            assert planner.classified == ["rate limited"] and not planner.planned

    asyncio.run(main())


def test_a_run_is_billed_once_with_usage_summed_over_its_attempts(log_url: str) -> None:
    ledger = Ledger()
    guard = VetoOnce()
    plugins = [ledger, guard]

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=plugins) as (client, gateway, log):
            bound_session(
                fake, gateway, Turn().text("a").usage(10, 5), Turn().text("b").usage(7, 3)
            )
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            await until(lambda: ledger.billed)
            # Clients replaying the whole run, twice, bill nothing more.
            for _ in range(2):
                replay = await client.get(f"/gateway/runs/{run_id}/events")
                assert run_types(sse_events(replay.text))[-1] == "Finish"
            await gateway.lifecycle.billing.wait_idle()  # type: ignore[union-attr]
            bill = gateway.pumps.store.bill(run_id)  # type: ignore[union-attr]
            finish = log.read(run_id=run_id)[-1]

        assert len(ledger.calls) == 1
        run, key, usage = ledger.calls[0]
        assert (run, key) == (run_id, idempotency_key(run_id))
        assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (17, 8, 25)
        assert usage["attempts"] == 2 and usage["provider_calls"] == 2
        assert finish.data["usage"] == usage  # the terminal event says what was billed
        assert bill is not None and bill.delivered_at is not None and bill.usage == usage

    asyncio.run(main())


def test_a_bill_whose_delivery_raised_is_delivered_again_with_the_same_key(log_url: str) -> None:
    ledger = Ledger(fail_first=True)
    settings = LifecycleSettings(billing=BillingSettings(retry_delay=0.05, scan_interval=0.05))

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        options = {"plugins": [ledger], "settings": GatewaySettings(lifecycle=settings)}
        async with gateway_client(log_url, fake, **options) as (client, gateway, _):
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            store = gateway.pumps.store  # type: ignore[union-attr]
            await until(lambda: (b := store.bill(run_id)) is not None and b.delivered_at)
            bill = store.bill(run_id)

        assert [call[1] for call in ledger.calls] == [idempotency_key(run_id)] * 2
        assert list(ledger.billed) == [idempotency_key(run_id)]
        assert bill is not None and bill.tries == 2 and bill.last_error is None

    asyncio.run(main())


def test_a_pump_restarted_mid_run_still_ends_and_bills_the_run_once(log_url: str) -> None:
    ledger = Ledger()

    async def main() -> None:
        async with harness(log_url, plugins=[ledger]) as h:
            release = asyncio.Event()
            h.fake.script(h.session_id, Turn().text("a").pause(release).text("b").usage(2, 2))
            run = await h.runs.start("conv-1", "go")
            await h.until(lambda: "Message" in run_types(h.events(run)))
            pumps = await h.take_over()  # another process's pump re-reads goose's events
            release.set()
            await h.finished(run)
            await pumps.lifecycle.billing.wait_idle()
            await h.until(lambda: ledger.calls)
            types = run_types(h.events(run))
            assert terminal_count(types) == 1 and types.count("UpstreamFinish") == 1
            assert Counter(call[1] for call in ledger.calls) == {idempotency_key(run.run_id): 1}

    asyncio.run(main())
