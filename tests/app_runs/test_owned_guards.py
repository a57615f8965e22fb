"""`owned_run` with a gateway's finish guards: the app's turn is checked as the lifecycle checks
goose's, a veto calls the app's follow-up, and a run whose guards give up ends flagged."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from gateway_kit import (
    Event,
    EventLog,
    Gateway,
    GatewaySettings,
    GuardVeto,
    LifecycleSettings,
    Plugins,
    RunError,
    RunGuards,
    hookimpl,
    owned_run,
)
from gateway_kit.runs.follow_ups import follow_up_prompt
from tests.support.owned_runs import STREAM, lease_count
from tests.support.waiting import settled, wait_until

PAGE = "public/report.html"
PAGE_VETO = GuardVeto("the page is not written", missing=[PAGE, "public/chart.svg"])


class PagesGuard:
    """Vetoes until the run has a `Written` event for each missing item."""

    def __init__(self, missing: Sequence[str] = (PAGE, "public/chart.svg")) -> None:
        self.missing = list(missing)
        self.asked: list[tuple[Any, list[Event]]] = []

    @hookimpl
    def finish_guard(self, run: Any, events: Sequence[Event]) -> GuardVeto | None:
        self.asked.append((run, list(events)))
        written = {e.data["path"] for e in events if e.type == "Written"}
        missing = [item for item in self.missing if item not in written]
        return GuardVeto("the page is not written", missing=missing) if missing else None


class AlwaysVetoes:
    @hookimpl
    def finish_guard(self, run: Any, events: Sequence[Event]) -> GuardVeto:
        return PAGE_VETO


class RaisingGuard:
    @hookimpl
    def finish_guard(self, run: Any, events: Sequence[Event]) -> None:
        raise OSError("the disk is gone")


class HangingGuard:
    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def finish_guard(self, run: Any, events: Sequence[Event]) -> None:
        self.release.wait(30)


def guards(*plugins: object, **limits: Any) -> RunGuards:
    return RunGuards(Plugins(plugins, load_entry_points=False), **limits)


def events_of(log: EventLog, run_id: str) -> list[Event]:
    settled(log)
    return log.read(run_id=run_id)


def writer(log: EventLog, calls: list[str], *paths: str) -> Callable[[str], None]:
    """A follow-up turn that writes `paths` (the next one at each call), then answers."""
    holder: dict[str, Any] = {}

    def follow_up(prompt: str) -> None:
        calls.append(prompt)
        run = holder["run"]
        if len(calls) <= len(paths):
            run.append("Written", {"path": paths[len(calls) - 1]})
        run.append("Message", {"text": "done now"})
        run.append("Finish", {"reason": "stop"})

    follow_up.holder = holder  # type: ignore[attr-defined]
    return follow_up


def test_a_turn_the_guards_pass_ends_with_a_plain_finish_of_its_own_data(log: EventLog) -> None:
    guard = PagesGuard(missing=())
    with owned_run(log, stream=STREAM, run_id="r-1", owner="ann", guards=guards(guard)) as run:
        run.append("Message", {"text": "hello"})
        assert run.append("Finish", {"reason": "stop"}) is None  # held back for the guards
        assert log.run_end("r-1") is None
        with pytest.raises(RunError, match="held back"):
            run.append("Message", {"text": "after the end"})
    end = log.run_end("r-1")
    assert end is not None and end.type == "Finish" and end.data == {"reason": "stop"}
    assert [e.type for e in events_of(log, "r-1")] == ["Message", "Finish"]
    [(asked, events)] = guard.asked
    assert (asked.run_id, asked.stream, asked.status, asked.attempt) == ("r-1", STREAM, "active", 1)
    assert asked.owner == "ann"
    assert [e.type for e in events] == ["Message"]
    assert lease_count(log) == 0


def test_a_veto_calls_the_follow_up_with_the_missing_items_then_the_guards_pass(
    log: EventLog,
) -> None:
    guard, calls = PagesGuard(), []
    follow_up = writer(log, calls, PAGE, "public/chart.svg")
    run_guards = guards(guard)
    with owned_run(log, stream=STREAM, run_id="r-1", guards=run_guards, follow_up=follow_up) as run:
        follow_up.holder["run"] = run  # type: ignore[attr-defined]
        run.append("Message", {"text": "the page is published at public/report.html"})
    expected, _, _ = follow_up_prompt([PAGE_VETO])
    assert calls[0] == expected  # names exactly both missing items
    assert f"- {PAGE}\n- public/chart.svg" in calls[0]
    assert "- public/chart.svg" in calls[1] and PAGE not in calls[1]
    events = events_of(log, "r-1")
    assert [e.type for e in events] == [
        "Message",
        "FollowUpStarted", "Written", "Message",
        "FollowUpStarted", "Written", "Message",
        "Finish",
    ]  # fmt: skip
    first = events[1].data
    assert first == {
        "attempt": 2,
        "reasons": ["the page is not written"],
        "missing": [PAGE, "public/chart.svg"],
        "prompt": calls[0],
    }
    assert events[-1].data == {"reason": "stop"}  # the follow-up's own Finish data, not flagged
    assert [asked.attempt for asked, _ in guard.asked] == [1, 2, 3]


@pytest.mark.parametrize("max_follow_ups", [0, 2])
def test_guards_that_never_pass_end_the_run_flagged_after_the_bounded_follow_ups(
    log: EventLog, caplog: pytest.LogCaptureFixture, max_follow_ups: int
) -> None:
    calls: list[str] = []
    follow_up = writer(log, calls)
    run_guards = guards(AlwaysVetoes(), max_follow_ups=max_follow_ups)
    with (
        caplog.at_level(logging.WARNING, "gateway_kit.runs"),
        owned_run(log, stream=STREAM, run_id="r-1", guards=run_guards, follow_up=follow_up) as run,
    ):
        follow_up.holder["run"] = run  # type: ignore[attr-defined]
        run.append("Message", {"text": "published!"})
    assert len(calls) == max_follow_ups
    events = events_of(log, "r-1")
    assert [e.type for e in events][-2:] == ["guard_failed", "Finish"]
    assert events[-2].data == {
        "type": "guard_failed",
        "reasons": ["the page is not written"],
        "missing": [PAGE, "public/chart.svg"],
        "follow_ups": max_follow_ups,
    }
    assert events[-1].data == {"guard_failed": True, **({"reason": "stop"} if calls else {})}
    assert [e.type for e in events].count("FollowUpStarted") == max_follow_ups
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("r-1" in m and "still vetoed" in m for m in warnings)
    assert lease_count(log) == 0


def test_a_veto_without_a_follow_up_ends_the_run_flagged_at_once(log: EventLog) -> None:
    with owned_run(log, stream=STREAM, run_id="r-1", guards=guards(AlwaysVetoes())) as run:
        run.append("Message", {"text": "published!"})
    events = events_of(log, "r-1")
    assert [e.type for e in events] == ["Message", "guard_failed", "Finish"]
    assert events[1].data["follow_ups"] == 0
    assert events[-1].data == {"guard_failed": True}


def test_the_gateways_run_guards_hold_its_plugins_to_its_lifecycle_limits(log: EventLog) -> None:
    settings = LifecycleSettings(max_follow_ups=1, hook_timeout=5.0)
    gateway = Gateway(
        log=log,
        plugins=[AlwaysVetoes()],
        settings=GatewaySettings(lifecycle=settings),
        allow_anonymous=True,
    )
    assert gateway.run_guards.plugins is gateway.plugins
    assert (gateway.run_guards.max_follow_ups, gateway.run_guards.hook_timeout) == (1, 5.0)
    calls: list[str] = []
    follow_up = writer(log, calls)
    with owned_run(
        log, stream=STREAM, run_id="r-1", guards=gateway.run_guards, follow_up=follow_up
    ) as run:
        follow_up.holder["run"] = run  # type: ignore[attr-defined]
    assert len(calls) == 1
    assert [e.type for e in events_of(log, "r-1")][-2:] == ["guard_failed", "Finish"]


def test_with_no_guard_loaded_a_run_ends_as_it_always_did(log: EventLog) -> None:
    # The built-in publish_guard is loaded (and off) in every gateway: leave it out here.
    none = RunGuards(Plugins(load_entry_points=False, block=["publish_guard"]))
    assert not none.any
    with owned_run(log, stream=STREAM, run_id="r-1", guards=none) as run:
        ended = run.append("Finish", {"reason": "stop"})
        assert ended is not None and log.run_end("r-1") == ended


def test_a_guard_that_raises_is_logged_and_ends_the_run_flagged_at_once_as_the_lifecycles_does(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[str] = []
    with owned_run(
        log,
        stream=STREAM,
        run_id="r-1",
        guards=guards(RaisingGuard()),
        follow_up=writer(log, calls),
    ) as run:
        run.append("Message", {"text": "hello"})
    end = log.run_end("r-1")
    assert end is not None and end.type == "Finish" and end.data == {"guard_failed": True}
    assert calls == []  # no follow-up: the agent cannot mend a guard that failed
    assert any(
        "RaisingGuard" in r.getMessage() and r.levelno >= logging.ERROR for r in caplog.records
    )


def test_a_raising_guard_does_not_hide_another_guards_veto(log: EventLog) -> None:
    with owned_run(
        log, stream=STREAM, run_id="r-1", guards=guards(RaisingGuard(), AlwaysVetoes())
    ) as run:
        run.append("Message", {"text": "hello"})
    assert [e.type for e in events_of(log, "r-1")][-2:] == ["guard_failed", "Finish"]


def test_a_guard_that_hangs_is_left_after_the_hook_timeout_and_fails_as_the_lifecycles_does(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    guard = HangingGuard()
    try:
        run_guards = guards(guard, hook_timeout=0.2)
        with owned_run(log, stream=STREAM, run_id="r-1", guards=run_guards) as run:
            run.append("Message", {"text": "hello"})
    finally:
        guard.release.set()
    end = log.run_end("r-1")
    assert end is not None and end.type == "Finish" and end.data == {"guard_failed": True}
    messages = [r.getMessage() for r in caplog.records]
    assert any("did not answer finish_guard within 0.2 s" in m for m in messages)


def test_a_follow_up_that_raises_ends_the_run_with_its_error_and_leaves_nothing_running(
    log: EventLog,
) -> None:
    def follow_up(prompt: str) -> None:
        raise ConnectionError("the agent went away")

    with (
        pytest.raises(ConnectionError, match="went away"),
        owned_run(
            log, stream=STREAM, run_id="r-1", guards=guards(AlwaysVetoes()), follow_up=follow_up
        ) as run,
    ):
        run.append("Message", {"text": "published!"})
    end = log.run_end("r-1")
    assert end is not None and end.type == "Error"
    assert end.data == {"error": "ConnectionError: the agent went away"}
    assert [e.type for e in events_of(log, "r-1")] == ["Message", "FollowUpStarted", "Error"]
    assert lease_count(log) == 0
    wait_until(lambda: not any(t.name == "gateway-kit-run-r-1" for t in threading.enumerate()))


def test_a_follow_up_that_ends_the_run_with_an_error_is_not_guarded_again(
    log: EventLog,
) -> None:
    guard, holder = PagesGuard(), {}

    def follow_up(prompt: str) -> None:
        holder["run"].append("Error", {"error": "the agent gave up"})

    with owned_run(
        log, stream=STREAM, run_id="r-1", guards=guards(guard), follow_up=follow_up
    ) as run:
        holder["run"] = run
    end = log.run_end("r-1")
    assert end is not None and end.type == "Error" and end.data == {"error": "the agent gave up"}
    assert len(guard.asked) == 1


def test_a_turn_that_raises_is_never_guarded(log: EventLog) -> None:
    guard = PagesGuard()
    with (
        pytest.raises(KeyError),
        owned_run(log, stream=STREAM, run_id="r-1", guards=guards(guard)) as run,
    ):
        run.append("Finish", {"reason": "stop"})
        raise KeyError("late")
    end = log.run_end("r-1")
    assert end is not None and end.type == "Error"
    assert guard.asked == []


def test_runs_of_several_threads_are_guarded_at_once_each_with_its_own_follow_ups(
    log: EventLog,
) -> None:
    run_guards = guards(PagesGuard(missing=[PAGE]))
    calls: dict[str, list[str]] = {}

    def task(n: int) -> None:
        run_id = f"r-{n}"
        calls[run_id] = []
        follow_up = writer(log, calls[run_id], PAGE)
        with owned_run(
            log, stream=f"conv-{n}", run_id=run_id, guards=run_guards, follow_up=follow_up
        ) as run:
            follow_up.holder["run"] = run  # type: ignore[attr-defined]
            run.append("Message", {"text": "published!"})

    threads = [threading.Thread(target=task, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    for n in range(4):
        end = log.run_end(f"r-{n}")
        assert end is not None and end.data == {"reason": "stop"}
        assert len(calls[f"r-{n}"]) == 1


def test_a_run_written_on_an_event_loops_thread_is_guarded_too(log: EventLog) -> None:
    async def main() -> None:  # blocking, as any owned run is; its guards need a loop of their own
        with owned_run(log, stream=STREAM, run_id="r-1", guards=guards(AlwaysVetoes())) as run:
            run.append("Message", {"text": "published!"})

    asyncio.run(main())
    assert [e.type for e in events_of(log, "r-1")] == ["Message", "guard_failed", "Finish"]
