"""Heartbeat decisions from the database: what a process's recorder noted, what other processes
wrote, the runs of bound streams, the heartbeat plugins, and the record of every decision."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

import orjson
import pytest
import sqlalchemy as sa

from gateway_kit import EventLog, hookimpl
from gateway_kit.app_runs.live import LiveOwnedRuns
from gateway_kit.app_runs.owned import owned_run
from gateway_kit.bindings.tmux_sessions import bindings_of
from gateway_kit.execution.decider import HeartbeatDecider, InvalidTmuxSession
from gateway_kit.execution.decision_log import MAX_KEPT, MAX_LISTED, DecisionLog
from gateway_kit.execution.recorder import ExecutionRecorder
from gateway_kit.execution.request_rows import RECENT, RequestRows
from gateway_kit.execution.settings import ExecutionSettings
from gateway_kit.execution.state import Outcome, RequestRecord, State
from gateway_kit.execution.tables import requests
from gateway_kit.execution.work import ActiveWork
from gateway_kit.hooks import PluginContext, Plugins

TMUX = "agent-1"


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def plugins(log: EventLog, *extra: object) -> Plugins:
    """The plugins of a gateway without the built-in pane reader: the traffic decides alone,
    unless a test gives a fallback of its own."""
    context = PluginContext(log=log)
    block = ("tmux_pane",)
    return Plugins(extra, load_entry_points=False, context=context, timeout=2.0, block=block)


def decider(
    log: EventLog, clock: Clock, *extra: object, recorder: ExecutionRecorder | None = None
) -> HeartbeatDecider:
    settings = ExecutionSettings(response_timeout=120.0, grace=5.0, fallback_timeout=0.5)
    # The runs an app writes itself, as a gateway hands them in.
    work = ActiveWork(log, active_runs=[LiveOwnedRuns(log).of_streams])
    return HeartbeatDecider(
        log, plugins(log, *extra), settings=settings, recorder=recorder, work=work, clock=clock
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
        assert {key: listed[0][key] for key in document} == document
        assert (listed[0]["since"], listed[0]["repeats"]) == (document["decided_at"], 1)
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
        with owned_run(
            log, stream="conv-1", run_id="run-1", tmux_session=TMUX, owner="alice"
        ) as run:
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
    bindings.bind("conv-1", "agent-1", "alice")
    bindings.bind("conv-1", "agent-2", "alice")
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
def test_a_fallback_that_fails_or_hangs_is_a_skip_of_an_unknown_session(
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
    assert (decision.decision, decision.reason, decision.pane) == ("skip", "fallback", "skip")
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


def ended(request_id: str, at: float, reason: str | None) -> RequestRecord:
    """A request of `TMUX` answered whole one second after it started, at `at`."""
    return RequestRecord(
        request_id,
        TMUX,
        "p",
        "POST",
        "/v1/chat/completions",
        at - 1,
        ended_at=at,
        outcome=Outcome.COMPLETED.value,
        finish_reason=reason,
        terminal_at=at,
    )


def test_the_pane_is_the_last_word_before_any_allow(log: EventLog) -> None:
    clock = Clock()
    RequestRows(log).write([ended("r1", clock.now - 1, "stop")], process="p", now=clock.now)
    # The traffic says idle; the pane shows a permission prompt (the reader says skip).
    prompt = Fallback("skip")
    decision = asyncio.run(decider(log, clock, prompt).decide(TMUX))
    assert (decision.decision, decision.reason, decision.pane) == ("skip", "pane_not_idle", "skip")
    assert "the last response ended with stop" in decision.detail
    assert prompt.asked == [TMUX]  # asked although the session was observed
    idle = asyncio.run(decider(log, clock, Fallback("allow")).decide(TMUX))
    assert (idle.decision, idle.reason, idle.pane) == ("allow", "response_stop", "allow")
    assert idle.as_json()["evidence"]["pane"] == "allow"


def test_a_policy_plugins_allow_is_held_to_the_pane_too(log: EventLog) -> None:
    decision = asyncio.run(decider(log, Clock(), Policy("allow"), Fallback("skip")).decide(TMUX))
    assert (decision.decision, decision.reason, decision.decided_by) == (
        "skip",
        "pane_not_idle",
        "policy",
    )


@pytest.mark.parametrize("answer", [RuntimeError("tmux crashed"), "yes please", "slow"])
def test_a_pane_reader_that_fails_or_hangs_turns_an_allow_into_a_skip(
    log: EventLog, answer: Any, caplog: pytest.LogCaptureFixture
) -> None:
    clock = Clock()
    RequestRows(log).write([ended("r1", clock.now - 1, "stop")], process="p", now=clock.now)
    release = threading.Event() if answer == "slow" else None
    fallback = Fallback("allow" if answer == "slow" else answer, release)
    try:
        with caplog.at_level(logging.ERROR):
            decision = asyncio.run(decider(log, clock, fallback).decide(TMUX))
    finally:
        if release is not None:
            release.set()
    assert (decision.decision, decision.reason) == ("skip", "pane_not_idle")
    assert "pane-reader" in caplog.text


def test_an_ending_asking_for_a_tool_is_never_an_allow_on_its_own(log: EventLog) -> None:
    clock = Clock()
    # The model's answer ended with tool_calls; the grace (5 s) is long over, nothing came.
    RequestRows(log).write([ended("r1", clock.now - 60, "tool_calls")], process="p", now=clock.now)
    alone = asyncio.run(decider(log, clock).decide(TMUX))
    assert (alone.decision, alone.reason, alone.state.state) == (
        "skip",
        "ending_unconfirmed",
        State.IDLE,
    )
    assert "'tool_calls'" in alone.detail
    asking = asyncio.run(decider(log, clock, Fallback("skip")).decide(TMUX))
    assert (asking.decision, asking.reason) == ("skip", "pane_not_idle")
    confirmed = asyncio.run(decider(log, clock, Fallback("allow")).decide(TMUX))
    assert (confirmed.decision, confirmed.reason) == ("allow", "grace_over")


def test_a_stop_or_a_broken_off_request_is_an_allow_when_no_pane_reader_is_configured(
    log: EventLog,
) -> None:
    clock = Clock()
    rows = RequestRows(log)
    rows.write([ended("r1", clock.now - 1, "stop")], process="p", now=clock.now)
    stop = asyncio.run(decider(log, clock).decide(TMUX))
    assert (stop.decision, stop.reason, stop.pane) == ("allow", "response_stop", None)
    timed_out = RequestRecord("r2", TMUX, "p", "POST", "/x", clock.now)
    rows.write([timed_out], process="p", now=clock.now)
    clock.now += 121
    rows.write([], process="p", now=clock.now)  # the process lives on: the request is open
    stale = asyncio.run(decider(log, clock).decide(TMUX))
    assert (stale.decision, stale.reason) == ("allow", "request_timed_out")


def test_repeated_decisions_fold_into_one_row(log: EventLog) -> None:
    clock = Clock()
    heartbeat = decider(log, clock)
    first_at = clock.now
    for _ in range(5):
        asyncio.run(heartbeat.decide(TMUX))
        clock.now += 60
    RequestRows(log).write([ended("r1", clock.now - 1, "stop")], process="p", now=clock.now)
    asyncio.run(heartbeat.decide(TMUX))
    listed = asyncio.run(heartbeat.history(TMUX))
    assert [(d["reason"], d["repeats"]) for d in listed] == [
        ("response_stop", 1),
        ("no_evidence", 5),
    ]
    assert listed[1]["since"] == first_at
    assert listed[1]["decided_at"] == first_at + 4 * 60


def test_a_sessions_decisions_are_kept_to_the_newest(log: EventLog) -> None:
    document = asyncio.run(decider(log, Clock()).decide(TMUX)).as_json()
    kept = 8
    record = DecisionLog(log, keep=kept)
    for n in range(kept + 20):  # alternating: no two in a row fold
        record.add({**document, "reason": f"r{n % 2}", "decided_at": float(n)})
    record.add({**document, "tmux_session_id": "agent-2", "decided_at": 0.0})
    newest = record.recent(TMUX, MAX_LISTED)
    assert [d["decided_at"] for d in newest] == [float(n) for n in range(kept + 19, 19, -1)]
    assert len(record.recent("agent-2")) == 1  # another session's are its own
    assert DecisionLog(log).keep == MAX_KEPT == MAX_LISTED  # by default, as many as are listed


def test_evidence_stays_small_however_much_work_waits(log: EventLog) -> None:
    approvals = [(f"conv-{n}", f"approval-{n:04}") for n in range(300)]
    heartbeat = decider(log, Clock())
    heartbeat.work.pending_approvals = lambda streams: approvals
    bindings_of(log).bind("conv-1", TMUX, "alice")
    decision = asyncio.run(heartbeat.decide(TMUX))
    assert (decision.decision, decision.reason) == ("skip", "approval_pending")
    evidence = decision.as_json()["evidence"]
    assert len(evidence["pending_approvals"]) == 10
    assert evidence["pending_approval_count"] == 300
    assert "approval-0002 and 297 more" in decision.detail
    assert len(orjson.dumps(decision.as_json())) < 4096


def test_a_sessions_ended_requests_are_kept_to_what_its_state_is_folded_from(
    log: EventLog,
) -> None:
    rows = RequestRows(log)
    for n in range(100):
        rows.write([ended(f"r{n:03}", 1000.0 + n, "stop")], process="p", now=1000.0 + n)
    open_one = RequestRecord("open", TMUX, "p", "POST", "/x", 2000.0)
    rows.write([open_one], process="p", now=2000.0)
    with log.tables.engine.connect() as conn:
        kept = conn.execute(
            sa.select(sa.func.count()).select_from(requests).where(requests.c.tmux_session == TMUX)
        ).scalar_one()
    assert kept <= 2 * RECENT + 1
    read = rows.read(TMUX, now=2001.0)
    assert "open" in {record.request_id for record in read}
    assert max(r.request_id for r in read if not r.open) == "r099"  # the newest answer stays
