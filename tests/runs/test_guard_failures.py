"""A finish guard that fails (raises, answers nonsense, does not answer in time) checked nothing:
the run is never reported as delivered. It ends at once with `guard_failed` and a `Finish`
flagged ``"guard_failed": true``, naming the guard, without follow-up turns the agent could not
act on; the failure is logged with the guard's name."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from gateway_kit import Event, GatewaySettings, GuardVeto, LifecycleSettings, hookimpl
from gateway_kit.testing import FakeGoose
from tests.support.runs import gateway_client, run_types, start_run, wait_status


class Crashing:
    __name__ = "crashing-guard"

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> GuardVeto | None:
        raise RecursionError("maximum recursion depth exceeded")


class Chatty:
    __name__ = "chatty-guard"

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> Any:
        return "looks delivered to me"


class Stuck:
    """Answers only once released (after the test)."""

    __name__ = "stuck-guard"

    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> None:
        self.release.wait(30)


class Vetoing:
    __name__ = "page-guard"

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> GuardVeto:
        return GuardVeto("the page is missing", missing=["public/fox.html"])


GUARDS = {"raises": Crashing, "answers nonsense": Chatty, "does not answer in time": Stuck}
LOGGED = {
    "raises": "'crashing-guard' raised in hook finish_guard",
    "answers nonsense": "'chatty-guard' answered 'looks delivered to me' to hook finish_guard",
    "does not answer in time": "'stuck-guard' did not answer finish_guard within 0.3 s",
}


def ended(log_url: str, *guards: object) -> tuple[dict[str, Any], list[Event], FakeGoose]:
    """A run whose goose finishes at once, held to `guards`: (the run shown, its events,
    the fake goose)."""
    fake = FakeGoose(ping_interval=0.05)
    settings = LifecycleSettings(hook_timeout=0.3, max_follow_ups=2)

    async def main() -> tuple[dict[str, Any], list[Event]]:
        options: dict[str, Any] = {
            "plugins": list(guards),
            "settings": GatewaySettings(lifecycle=settings),
        }
        async with gateway_client(log_url, fake, **options) as (client, _, log):
            run_id = await start_run(client, "make the fox page")
            shown = await wait_status(client, run_id, "finished")
            return shown, log.read(run_id=run_id)

    shown, events = asyncio.run(main())
    return shown, events, fake


@pytest.mark.parametrize("failure", list(GUARDS))
def test_a_failing_guard_ends_the_run_guard_failed_at_once_never_as_delivered(
    log_url: str, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    guard = GUARDS[failure]()
    try:
        with caplog.at_level(logging.ERROR):
            shown, events, fake = ended(log_url, guard)
    finally:
        if isinstance(guard, Stuck):
            guard.release.set()
    types = run_types(events)
    assert types[-2:] == ["guard_failed", "Finish"] and "FollowUpStarted" not in types
    assert len(fake.reply_calls) == 1  # no follow-up turn: the agent cannot mend a guard
    assert events[-1].data["guard_failed"] is True and shown["guard_failed"] is True
    assert shown["status"] == "finished" and shown["attempt"] == 1
    [reason] = events[-2].data["reasons"]
    assert repr(guard.__name__) in reason and "could not check" in reason
    assert events[-2].data["follow_ups"] == 0
    assert any(LOGGED[failure] in r.getMessage() for r in caplog.records)


def test_a_failing_guard_beside_a_veto_ends_the_run_at_once_with_both_reasons(
    log_url: str,
) -> None:
    shown, events, fake = ended(log_url, Crashing(), Vetoing())
    assert run_types(events)[-2:] == ["guard_failed", "Finish"] and len(fake.reply_calls) == 1
    reasons = events[-2].data["reasons"]
    assert "the page is missing" in reasons
    assert any("'crashing-guard' could not check" in reason for reason in reasons)
    assert events[-2].data["missing"] == ["public/fox.html"]
    assert shown["guard_failed"] is True
