"""Every transition of a tmux session's execution state, each from its own test, at times the
test gives: nothing sleeps, no clock runs."""

from __future__ import annotations

import pytest

from gateway_kit.execution.state import Outcome, State, Timings

from .sessions import Session


def test_a_session_nothing_was_observed_of_is_unknown() -> None:
    assert Session().at(1000.0).state is State.UNKNOWN


def test_a_request_makes_it_wait_for_the_response() -> None:
    state = Session().request("r1", at=10.0).at(11.0)
    assert state.state is State.WAITING_RESPONSE
    assert (state.last_request_id, state.last_request_at) == ("r1", 10.0)


def test_a_stream_that_opens_keeps_it_streaming() -> None:
    state = Session().request("r1", at=10.0).sse_opened("r1", at=10.5).at(500.0)
    assert state.state is State.STREAMING_OPEN  # however long: the stream is still open
    assert state.open_sse_count == 1
    assert state.last_request_was_stream


def test_a_non_stream_answer_ending_with_stop_is_idle() -> None:
    state = Session().request("r1", at=10.0).ended("r1", at=12.0, reason="stop").at(12.1)
    assert state.state is State.IDLE
    assert (state.last_finish_reason, state.last_response_at) == ("stop", 12.0)


@pytest.mark.parametrize("reason", ["tool_calls", "length"])
def test_a_non_stream_answer_ending_otherwise_gives_a_grace(reason: str) -> None:
    session = Session().request("r1", at=10.0).ended("r1", at=12.0, reason=reason)
    assert session.at(12.1).state is State.POST_RESPONSE_GRACE


def test_a_request_without_a_response_within_the_timeout_goes_stale() -> None:
    session = Session().request("r1", at=10.0)
    assert session.at(129.9).state is State.WAITING_RESPONSE
    assert session.at(130.0).state is State.STALED


def test_a_stream_ending_with_stop_is_idle() -> None:
    session = Session().request("r1", at=10.0).sse_opened("r1", at=10.2)
    state = session.ended("r1", at=40.0, reason="stop").at(40.1)
    assert state.state is State.IDLE
    assert state.last_sse_close_at == 40.0
    assert state.last_terminal_at == 40.0


def test_a_stream_ending_with_tool_calls_gives_a_grace() -> None:
    session = Session().request("r1", at=10.0).sse_opened("r1", at=10.2)
    assert session.ended("r1", at=40.0, reason="tool_calls").at(41.0).state is (
        State.POST_RESPONSE_GRACE
    )


@pytest.mark.parametrize(
    "outcome", [Outcome.CLIENT_CLOSED, Outcome.CUT, Outcome.ERROR, Outcome.PROCESS_GONE]
)
def test_a_stream_broken_off_before_its_terminal_event_is_stale(outcome: Outcome) -> None:
    session = Session().request("r1", at=10.0).sse_opened("r1", at=10.2)
    state = session.ended("r1", at=20.0, outcome=outcome, reason=None).at(20.1)
    assert state.state is State.STALED
    assert state.last_client_close_before_terminal is (outcome is Outcome.CLIENT_CLOSED)


def test_a_request_during_the_grace_waits_again() -> None:
    session = Session().request("r1", at=10.0).ended("r1", at=12.0, reason="tool_calls")
    assert session.request("r2", at=13.0).at(13.5).state is State.WAITING_RESPONSE


def test_the_grace_running_out_is_idle() -> None:
    session = Session().request("r1", at=10.0).ended("r1", at=12.0, reason="tool_calls")
    assert session.at(16.9).state is State.POST_RESPONSE_GRACE
    assert session.at(17.0).state is State.IDLE


def test_a_request_after_a_stale_one_waits_again() -> None:
    session = Session().request("r1", at=10.0)
    assert session.at(200.0).state is State.STALED
    assert session.request("r2", at=201.0).at(202.0).state is State.WAITING_RESPONSE


def test_it_streams_while_any_of_several_streams_is_open() -> None:
    session = Session()
    session.request("a", at=1.0).sse_opened("a", at=1.1)
    session.request("b", at=2.0).sse_opened("b", at=2.1)
    assert session.at(3.0).open_sse_count == 2
    session.ended("a", at=4.0, reason="stop")
    state = session.at(4.5)
    assert (state.state, state.open_sse_count) == (State.STREAMING_OPEN, 1)
    assert session.ended("b", at=5.0, reason="stop").at(5.5).state is State.IDLE


def test_a_waiting_request_is_not_hidden_by_a_newer_answer() -> None:
    session = Session().request("slow", at=1.0).request("quick", at=2.0)
    session.ended("quick", at=3.0, reason="stop")
    assert session.at(4.0).state is State.WAITING_RESPONSE
    # Past the timeout the slow one no longer counts: the newest answer decides.
    assert session.at(125.0).state is State.IDLE


def test_a_whole_answer_without_a_finish_reason_ends_its_request() -> None:
    # A plain JSON or HTML answer of the app (a status page) has no finish_reason.
    session = Session().request("r1", at=1.0).ended("r1", at=1.2, reason=None)
    assert session.at(1.3).state is State.IDLE


def test_the_timings_are_settings() -> None:
    session = Session(Timings(response_timeout=2.0, grace=0.5)).request("r1", at=0.0)
    assert session.at(2.0).state is State.STALED
    session.request("r2", at=3.0).ended("r2", at=3.1, reason="length")
    assert session.at(3.5).state is State.POST_RESPONSE_GRACE
    assert session.at(3.6).state is State.IDLE
    with pytest.raises(ValueError, match="grace"):
        Timings(grace=0)
