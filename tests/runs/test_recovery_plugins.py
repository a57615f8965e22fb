"""The built-in recoveries (`visual_fallback`, `tool_history_recovery`, `transient_retry`)
through a gateway, the fake goose and respx, as a client of the run API sees them."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections import deque
from typing import Any

from gateway_kit import Event, GuardVeto, hookimpl
from gateway_kit.testing import TEXT_ONLY_MODEL_ERROR, FakeGoose, Turn, echo_turn
from gateway_kit.testing.extensions import session_tools
from gateway_kit.testing.turns import TINY_PNG_BASE64
from gateway_kit.upstream.goose.connection import LOST_RUN_ERROR
from gateway_kit.upstream.goose.pump import UNREACHABLE_ERROR
from tests.support.runs import (
    bound_session,
    cancel_of,
    gateway_client,
    reply_of,
    start_run,
    wait_status,
)
from tests.support.waiting import until

from .plugins import built_ins

OPENAI_TOOL_HISTORY = (
    "Request failed: Bad request (400): An assistant message with 'tool_calls' must be followed "
    "by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not "
    "have response messages: call_abc"
)


def new_sessions_play(*turns: Turn) -> FakeGoose:
    """A fake whose sessions made by `/agent/start` play `turns` in order, then echo."""
    queued = deque(turns)
    return FakeGoose(
        ping_interval=0.05, default_turn=lambda m: queued.popleft() if queued else echo_turn(m)
    )


def started_overrides(fake: FakeGoose) -> list[Any]:
    return [r.json().get("extension_overrides") for r in fake.requests if r.path == "/agent/start"]


def tool_names(fake: FakeGoose, session_id: str) -> set[str]:
    return {t["name"] for t in session_tools(fake.sessions[session_id].extensions, fake.tools)}


def assert_cancelled_before_each_retry(fake: FakeGoose, first: int = 0, last: int = -1) -> None:
    """goose saw each of one run's requests cancelled before the next one was sent."""
    calls = fake.reply_calls[first:] if last == -1 else fake.reply_calls[first : last + 1]
    for previous, retry in itertools.pairwise(calls):
        assert fake.requests.index(cancel_of(fake, previous.request_id)) < (
            fake.requests.index(reply_of(fake, retry.request_id))
        )


def test_image_url_recovers_in_a_clean_session_without_the_image_tool(log_url: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=built_ins()) as (client, gateway, _):
            old = bound_session(
                fake,
                gateway,
                Turn().text("Hi there, ", "noted."),
                Turn().text("Let me look at it.").read_image().error(TEXT_ONLY_MODEL_ERROR),
            )
            first_run = await start_run(client, "remember the blue button")
            await wait_status(client, first_run, "finished")
            run_id = await start_run(client, "check the screenshot, then fix the page title")
            shown = await wait_status(client, run_id, "finished")
            other_run = await start_run(client, "look at my image", stream="other")
            await wait_status(client, other_run, "finished")
            other_binding = gateway.pumps.store.binding("other")  # type: ignore[union-attr]

        failed, retry = fake.reply_calls[1], fake.reply_calls[2]
        assert failed.session_id == old and retry.session_id != old
        # The clean session has every extension of the failed one, the image tool left out.
        assert started_overrides(fake)[0] == [
            {**fake.extensions[0], "available_tools": ["shell", "text_editor"]},
            fake.extensions[1],
        ]
        assert "developer__read_image" not in tool_names(fake, retry.session_id)
        assert "developer__shell" in tool_names(fake, retry.session_id)
        # Its first reply carries the visible text, and tells the agent to skip visual checks.
        context = retry.body["override_conversation"]
        assert [(m["role"], m["content"][0]["text"]) for m in context] == [
            ("user", "remember the blue button"),
            ("assistant", "Hi there, noted.\n\nLet me look at it."),
        ]
        flat = json.dumps(context)
        assert "toolRequest" not in flat and "toolResponse" not in flat
        assert TINY_PNG_BASE64 not in flat and '"image"' not in flat
        prompt = retry.user_message["content"][0]["text"]
        assert "Skip every visual check" in prompt and "fix the page title" in prompt
        assert_cancelled_before_each_retry(fake, 1, 2)
        assert [(a["kind"], a["recovery"]) for a in shown["attempts"]] == [
            ("initial", None),
            ("recovery", "visual_fallback"),
        ]
        assert shown["attempts"][1]["reason"] == "SESSION_VISUAL_CONTEXT_UNSUPPORTED"
        # Another conversation keeps its images.
        assert other_binding is not None and other_binding.session_id not in (old, retry.session_id)
        assert "developer__read_image" in tool_names(fake, other_binding.session_id)
        assert fake.sessions[other_binding.session_id].extensions == fake.extensions

    asyncio.run(main())


def test_one_run_recovers_its_tool_history_and_then_takes_a_visual_fallback(
    log_url: str,
) -> None:
    async def main() -> None:
        fake = new_sessions_play(
            Turn().text("Starting again.").error(f'{{"error":"{TEXT_ONLY_MODEL_ERROR}"}}'),
            Turn().text("Done, without looking."),
        )
        async with gateway_client(log_url, fake, plugins=built_ins()) as (client, gateway, _):
            bound_session(fake, gateway, Turn().tool_call("shell").error(OPENAI_TOOL_HISTORY))
            run_id = await start_run(client, "build the page")
            shown = await wait_status(client, run_id, "finished")

        assert [(a["kind"], a["recovery"], a["reason"]) for a in shown["attempts"]] == [
            ("initial", None, None),
            ("recovery", "tool_history_recovery", "SESSION_TOOL_HISTORY_INVALID"),
            ("recovery", "visual_fallback", "SESSION_VISUAL_CONTEXT_UNSUPPORTED"),
        ]
        sessions = [call.session_id for call in fake.reply_calls]
        assert len(set(sessions)) == 3  # each recovery in a clean session of its own
        kept, without_image = started_overrides(fake)
        assert kept == fake.extensions  # tool history: every tool kept
        assert without_image[0]["available_tools"] == ["shell", "text_editor"]
        assert_cancelled_before_each_retry(fake)
        # The visual fallback's context holds the tool-history session's visible text too.
        texts = [m["content"][0]["text"] for m in fake.reply_calls[2].body["override_conversation"]]
        assert texts == ["Starting again."]

    asyncio.run(main())


class VetoFirstTurn:
    """A guard that asks for one follow-up turn."""

    __name__ = "veto-first-turn"

    def __init__(self) -> None:
        self.asked = 0

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> GuardVeto | None:
        self.asked += 1
        return GuardVeto("the summary is missing") if self.asked == 1 else None


class Backoffs:
    """Stands in for the lifecycle's wait: notes each delay asked; `hold` keeps it waiting
    until the run is cancelled or `release` is set."""

    def __init__(self, *, hold: bool = False) -> None:
        self.delays: list[float] = []
        self.hold = hold
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def __call__(self, delay: float, woken: asyncio.Event) -> None:
        self.delays.append(delay)
        self.waiting.set()
        if self.hold:
            ended = [asyncio.ensure_future(e.wait()) for e in (woken, self.release)]
            _, pending = await asyncio.wait(ended, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()


async def follow_up_refused(
    client: Any, gateway: Any, fake: FakeGoose, refusals: list[str | None], backoffs: Backoffs
) -> str:
    """A run whose guard asks for a follow-up that goose refuses with a 503 once per item of
    `refusals` (each its `Retry-After`, or None)."""
    gateway.lifecycle.backoffs.wait = backoffs
    release = asyncio.Event()
    session = bound_session(fake, gateway, Turn().pause(release).text("Here it is."))
    run_id = await start_run(client, "write the summary")
    await until(lambda: len(fake.reply_calls) == 1)
    for retry_after in refusals:
        fake.refuse_replies(session, 503, "overloaded", retry_after=retry_after)
    release.set()
    return run_id


def test_a_refused_follow_up_is_sent_again_after_a_backoff_honouring_retry_after(
    log_url: str,
) -> None:
    backoffs = Backoffs()

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        plugins = [*built_ins(), VetoFirstTurn()]
        async with gateway_client(log_url, fake, plugins=plugins) as (client, gateway, _):
            run_id = await follow_up_refused(client, gateway, fake, [None, "7"], backoffs)
            shown = await wait_status(client, run_id, "finished")

        assert backoffs.delays == [1.0, 7.0]  # the first backoff, then goose's Retry-After
        assert [c.status for c in fake.reply_calls] == [200, 503, 503, 200]
        follow_up = fake.reply_calls[1].user_message["content"][0]["text"]
        assert "the summary is missing" in follow_up
        assert [c.user_message["content"][0]["text"] for c in fake.reply_calls[2:]] == [
            follow_up,
            follow_up,
        ]  # the refused request, sent again as it was
        assert len({c.session_id for c in fake.reply_calls}) == 1
        assert_cancelled_before_each_retry(fake)
        assert [(a["kind"], a["recovery"], a["recovery_try"]) for a in shown["attempts"]] == [
            ("initial", None, None),
            ("follow_up", None, None),
            ("recovery", "transient_retry", 1),
            ("recovery", "transient_retry", 2),
        ]

    asyncio.run(main())


def test_transient_failures_past_the_budget_end_the_run_with_its_error(log_url: str) -> None:
    backoffs = Backoffs()

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        plugins = [*built_ins(), VetoFirstTurn()]
        async with gateway_client(log_url, fake, plugins=plugins) as (client, gateway, log):
            run_id = await follow_up_refused(client, gateway, fake, [None, None, None], backoffs)
            shown = await wait_status(client, run_id, "failed")
            end = log.run_end(run_id)

        assert backoffs.delays == [1.0, 2.0]  # doubling, two retries, no third
        assert [c.status for c in fake.reply_calls] == [200, 503, 503, 503]
        assert end is not None and end.type == "Error"
        assert end.data["error_class"] == "UPSTREAM_TRANSIENT"
        assert "goose answered 503: overloaded" in end.data["error"]
        recoveries = [a["recovery"] for a in shown["attempts"] if a["kind"] == "recovery"]
        assert recoveries == ["transient_retry", "transient_retry"]

    asyncio.run(main())


def test_a_cancel_during_the_backoff_ends_the_run_as_cancelled(log_url: str) -> None:
    backoffs = Backoffs(hold=True)

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        plugins = [*built_ins(), VetoFirstTurn()]
        async with gateway_client(log_url, fake, plugins=plugins) as (client, gateway, log):
            run_id = await follow_up_refused(client, gateway, fake, ["3"], backoffs)
            await backoffs.waiting.wait()
            answer = await client.post(f"/gateway/runs/{run_id}/cancel")
            assert answer.status_code == 200, answer.text
            await wait_status(client, run_id, "cancelled")
            end = log.run_end(run_id)

        assert backoffs.delays == [3.0]
        assert [c.status for c in fake.reply_calls] == [200, 503]  # nothing sent after
        assert end is not None and end.type == "Finish" and end.data["reason"] == "cancelled"

    asyncio.run(main())


def test_a_request_waiting_out_its_backoff_is_not_taken_for_lost(log_url: str) -> None:
    """goose does not know the retry's request before it is sent: a pump that reconnects
    meanwhile and reports it lost is not heard."""
    backoffs = Backoffs(hold=True)

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        plugins = [*built_ins(), VetoFirstTurn()]
        async with gateway_client(log_url, fake, plugins=plugins) as (client, gateway, _):
            run_id = await follow_up_refused(client, gateway, fake, ["2"], backoffs)
            await backoffs.waiting.wait()
            waiting = gateway.pumps.store.get(run_id)  # type: ignore[union-attr]
            lost = LOST_RUN_ERROR.format(request_id=waiting.upstream_request_id)
            await gateway.lifecycle.upstream_failed(waiting, lost)  # type: ignore[union-attr]
            backoffs.release.set()
            shown = await wait_status(client, run_id, "finished")

        assert [c.status for c in fake.reply_calls] == [200, 503, 200]
        assert shown["attempts"][-1]["upstream_request_id"] == fake.reply_calls[-1].request_id

    asyncio.run(main())


def test_a_run_goose_stayed_unreachable_for_sends_its_message_again(log_url: str) -> None:
    backoffs = Backoffs()

    async def main() -> None:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake, plugins=built_ins()) as (client, gateway, _):
            gateway.lifecycle.backoffs.wait = backoffs  # type: ignore[union-attr]
            session = bound_session(fake, gateway, Turn().hang())
            run_id = await start_run(client, "summarise the report")
            await until(lambda: len(fake.reply_calls) == 1)
            current = gateway.pumps.store.get(run_id)  # type: ignore[union-attr]
            gave_up = UNREACHABLE_ERROR.format(seconds=60)  # what the pump reports
            await gateway.lifecycle.upstream_failed(current, gave_up)  # type: ignore[union-attr]
            shown = await wait_status(client, run_id, "finished")

        assert backoffs.delays == [1.0]
        first, again = fake.reply_calls
        assert again.session_id == first.session_id == session
        assert again.user_message["content"][0]["text"] == "summarise the report"
        assert_cancelled_before_each_retry(fake)
        assert shown["attempts"][-1]["reason"] == "UPSTREAM_TRANSIENT"

    asyncio.run(main())
