"""Heartbeat decisions from the database: what a process's recorder noted, what other processes
wrote, the runs of bound streams, the heartbeat plugins, and the record of every decision."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import pytest

from gateway_kit import EventLog, hookimpl
from gateway_kit.app_runs.owned import owned_run
from gateway_kit.execution.bindings import bindings_of
from gateway_kit.execution.decider import HeartbeatDecider, InvalidTmuxSession
from gateway_kit.execution.recorder import ExecutionRecorder
from gateway_kit.execution.request_rows import RequestRows
from gateway_kit.execution.settings import ExecutionSettings
from gateway_kit.execution.state import Outcome, RequestRecord, State
from gateway_kit.hooks import PluginContext, Plugins

TMUX = "agent-1"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def plugins(log: EventLog, *extra: object) -> Plugins:
    return Plugins(extra, load_entry_points=False, context=PluginContext(log=log), timeout=2.0)


def decider(
    log: EventLog, clock: Clock, *extra: object, recorder: ExecutionRecorder | None = None
) -> HeartbeatDecider:
    settings = ExecutionSettings(response_timeout=120.0, grace=5.0, fallback_timeout=0.5)
    return HeartbeatDecider(
        log, plugins(log, *extra), settings=settings, recorder=recorder, clock=clock
    )


def test_what_this_process_saw_decides_and_every_decision_is_recorded(log: EventLog) -> None:
    async def scenario() -> None:
        clock = Clock()
        recorder = ExecutionRecorder(RequestRows(log), clock=clock)
        heartbeat = decider(log, clock, recorder=recorder)
        recorder.started("r1", TMUX, "POST", "/v1/chat/completions")
        clock.now += 1
        waiting = await heartbeat.decide(TMUX)
        assert (waiting.decision, waiting.reason) == ("skip", "waiting_response")
        recorder.sse_opened("r1")
        clock.now += 1
        assert (await heartbeat.decide(TMUX)).reason == "sse_open"
        recorder.ended("r1", Outcome.COMPLETED, finish_reason="stop", terminal=True)
        clock.now += 1
        idle = await heartbeat.decide(TMUX)
        assert (idle.decision, idle.reason, idle.state.state) == (
            "allow",
            "response_stop",
            State.IDLE,
        )
        document = idle.as_json()
        assert document["evidence"]["last_finish_reason"] == "stop"
        assert document["evidence"]["last_request_id"] == "r1"
        listed = await heartbeat.history(TMUX)
        assert [d["reason"] for d in listed] == ["response_stop", "sse_open", "waiting_response"]
        assert listed[0] == document
        await recorder.stop()

    asyncio.run(scenario())


def test_another_process_answers_alike(log: EventLog, log_url: str) -> None:
    other = EventLog(log_url)  # another process's connection to the same database
    try:

        async def scenario() -> None:
            clock = Clock()
            recorder = ExecutionRecorder(RequestRows(log), clock=clock)
            here = decider(log, clock, recorder=recorder)
            there = decider(other, clock)
            recorder.started("r1", TMUX, "GET", "/v1/stream")
            recorder.sse_opened("r1")
            assert await recorder.flush()
            for heartbeat in (here, there):
                decision = await heartbeat.decide(TMUX)
                assert (decision.decision, decision.reason) == ("skip", "sse_open")
            recorder.ended("r1", Outcome.CLIENT_CLOSED)
            assert await recorder.flush()
            answers = [(await h.decide(TMUX)).as_json() for h in (here, there)]
            assert answers[0]["reason"] == answers[1]["reason"] == "client_closed"
            assert answers[0]["evidence"] == answers[1]["evidence"]
            await recorder.stop()

        asyncio.run(scenario())
    finally:
        other.close()


def test_the_open_requests_of_a_process_that_stopped_end_with_it(log: EventLog) -> None:
    rows = RequestRows(log, process_ttl=15.0)
    opened = RequestRecord("r1", TMUX, "dead-process", "GET", "/s", 100.0, sse_opened_at=100.5)
    rows.write([opened], process="dead-process", now=101.0)
    assert rows.read(TMUX, now=110.0)[0].open  # renewed 9 s ago: still streaming
    gone = rows.read(TMUX, now=117.0)[0]
    assert (gone.outcome, gone.ended_at) == (Outcome.PROCESS_GONE.value, 101.0)

    async def scenario() -> None:
        decision = await decider(log, Clock(117.0)).decide(TMUX)
        assert (decision.decision, decision.reason) == ("allow", "process_gone")

    asyncio.run(scenario())


def test_an_active_run_of_a_bound_stream_is_a_skip(log: EventLog) -> None:
    clock = Clock()
    heartbeat = decider(log, clock)
    inside = threading.Event()
    leave = threading.Event()

    def write_run() -> None:
        with owned_run(log, stream="conv-1", run_id="run-1", tmux_session=TMUX) as run:
            run.append("Message", {"text": "working"})
            inside.set()
            leave.wait(10)

    writer = threading.Thread(target=write_run)
    writer.start()
    try:
        assert inside.wait(10)
        during = asyncio.run(heartbeat.decide(TMUX))
        assert (during.decision, during.reason) == ("skip", "run_active")
        assert during.work.active_runs == ("run-1",)
        assert during.as_json()["evidence"]["bound_streams"] == ["conv-1"]
    finally:
        leave.set()
        writer.join()
    after = asyncio.run(heartbeat.decide(TMUX))
    assert after.reason == "no_evidence"  # nothing observed, no fallback: never typed blind


def test_a_binding_is_replaced_by_the_newest(log: EventLog) -> None:
    bindings = bindings_of(log)
    bindings.bind("conv-1", "agent-1")
    bindings.bind("conv-1", "agent-2")
    assert bindings.streams_of("agent-1") == []
    assert bindings.streams_of("agent-2") == ["conv-1"]
    bindings_of(log).refresh()
    assert bindings.cached("conv-1") == "agent-2"


class Policy:
    __name__ = "night-policy"

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    @hookimpl
    def heartbeat_policy(self, state: Any, now: float) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class Fallback:
    __name__ = "pane-reader"

    def __init__(self, answer: Any, release: threading.Event | None = None) -> None:
        self.answer = answer
        self.release = release
        self.asked: list[str] = []

    @hookimpl
    def heartbeat_fallback(self, tmux_session_id: str) -> Any:
        self.asked.append(tmux_session_id)
        if self.release is not None:
            self.release.wait(10)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_policy_plugin_overrides_the_built_in_order(log: EventLog) -> None:
    decision = asyncio.run(decider(log, Clock(), Policy("allow")).decide(TMUX))
    assert (decision.decision, decision.reason, decision.decided_by) == (
        "allow",
        "policy",
        "policy",
    )


@pytest.mark.parametrize("answer", [RuntimeError("boom"), "maybe"])
def test_a_failing_policy_counts_as_none_and_is_logged_by_name(
    log: EventLog, answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR):
        decision = asyncio.run(decider(log, Clock(), Policy(answer)).decide(TMUX))
    assert (decision.decision, decision.reason) == ("skip", "no_evidence")
    assert "night-policy" in caplog.text


def test_the_fallback_decides_only_what_nothing_was_observed_of(log: EventLog) -> None:
    fallback = Fallback("allow")
    clock = Clock()
    decision = asyncio.run(decider(log, clock, fallback).decide(TMUX))
    assert (decision.decision, decision.decided_by, decision.state.state) == (
        "allow",
        "fallback",
        State.UNKNOWN,
    )
    RequestRows(log).write(
        [RequestRecord("r1", TMUX, "p", "POST", "/x", clock.now - 1)], process="p", now=clock.now
    )
    observed = asyncio.run(decider(log, clock, fallback).decide(TMUX))
    assert observed.reason == "waiting_response"
    assert fallback.asked == [TMUX]  # not asked once something was observed


@pytest.mark.parametrize("answer", [RuntimeError("tmux crashed"), "yes please", "slow"])
def test_a_fallback_that_fails_or_hangs_is_a_skip(
    log: EventLog, answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event() if answer == "slow" else None
    fallback = Fallback("allow" if answer == "slow" else answer, release)
    try:
        with caplog.at_level(logging.ERROR):
            decision = asyncio.run(decider(log, Clock(), fallback).decide(TMUX))
    finally:
        if release is not None:
            release.set()
    assert (decision.decision, decision.reason) == ("skip", "no_evidence")
    assert "pane-reader" in caplog.text


@pytest.mark.parametrize("bad", ["", " ", "a\nb", "x" * 257, "tab\there"])
def test_an_id_no_tmux_session_can_have_is_refused_before_anything_is_read(
    log: EventLog, bad: str
) -> None:
    with pytest.raises(InvalidTmuxSession):
        asyncio.run(decider(log, Clock()).decide(bad))
    assert asyncio.run(decider(log, Clock()).history("agent-1")) == []


def test_pruning_forgets_what_is_older_than_the_retention(log: EventLog) -> None:
    clock = Clock(1_000.0)
    heartbeat = decider(log, clock)
    rows = RequestRows(log)
    old = RequestRecord("old", TMUX, "p", "GET", "/", 10.0, ended_at=11.0, outcome="completed")
    rows.write([old], process="p", now=11.0)
    asyncio.run(heartbeat.decide(TMUX))
    clock.now += heartbeat.settings.retention + 1
    recent = RequestRecord(
        "new", TMUX, "p", "GET", "/", clock.now - 2, ended_at=clock.now - 1, outcome="completed"
    )
    rows.write([recent], process="p", now=clock.now)
    asyncio.run(heartbeat.prune())
    assert [r.request_id for r in rows.read(TMUX, clock.now)] == ["new"]
    assert asyncio.run(heartbeat.history(TMUX)) == []
