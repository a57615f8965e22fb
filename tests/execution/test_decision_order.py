"""The gateway's own order of a heartbeat decision, and what random interleavings of observed
changes can never make it do."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway_kit.execution.decider import ALLOW, SKIP, built_in
from gateway_kit.execution.settings import ExecutionSettings
from gateway_kit.execution.state import Outcome, State
from gateway_kit.execution.work import Work

from .sessions import Session

SETTINGS = ExecutionSettings(response_timeout=120.0, grace=5.0)
RUN = Work(streams=("conv-1",), active_runs=("run-1",))
APPROVAL = Work(streams=("conv-1",), pending_approvals=("ap-1",))


NOTHING = Work()


def decide(session: Session, now: float, work: Work = NOTHING) -> tuple[str, str] | None:
    decided = built_in(session.at(now), work, SETTINGS)
    return None if decided is None else decided[:2]


def test_an_open_stream_is_a_skip() -> None:
    session = Session().request("r1", at=1.0).sse_opened("r1", at=1.1)
    assert decide(session, 9999.0) == (SKIP, "sse_open")


@pytest.mark.parametrize(("work", "reason"), [(RUN, "run_active"), (APPROVAL, "approval_pending")])
def test_an_active_run_or_a_pending_approval_is_a_skip_whatever_the_requests(
    work: Work, reason: str
) -> None:
    idle = Session().request("r1", at=1.0).ended("r1", at=2.0)
    assert decide(idle, 3.0) == (ALLOW, "response_stop")
    assert decide(idle, 3.0, work) == (SKIP, reason)
    assert decide(Session(), 3.0, work) == (SKIP, reason)  # even with nothing observed


def test_a_request_inside_the_timeout_is_a_skip_and_past_it_an_allow() -> None:
    session = Session().request("r1", at=0.0)
    assert decide(session, 119.0) == (SKIP, "waiting_response")
    assert decide(session, 121.0) == (ALLOW, "request_timed_out")


def test_a_grace_is_a_skip_until_it_runs_out() -> None:
    session = Session().request("r1", at=0.0).ended("r1", at=1.0, reason="tool_calls")
    assert decide(session, 2.0) == (SKIP, "post_response_grace")
    assert decide(session, 6.0) == (ALLOW, "grace_over")


@pytest.mark.parametrize(
    ("outcome", "reason"),
    [
        (Outcome.CLIENT_CLOSED, "client_closed"),
        (Outcome.CUT, "stream_cut"),
        (Outcome.ERROR, "response_error"),
        (Outcome.PROCESS_GONE, "process_gone"),
    ],
)
def test_a_response_broken_off_is_an_allow_saying_how(outcome: Outcome, reason: str) -> None:
    session = Session().request("r1", at=0.0).sse_opened("r1", at=0.1)
    session.ended("r1", at=5.0, outcome=outcome, reason=None)
    assert decide(session, 5.1) == (ALLOW, reason)


def test_nothing_observed_is_left_to_the_fallback() -> None:
    assert decide(Session(), 1.0) is None
    assert Session().at(1.0).state is State.UNKNOWN


# --- random interleavings -------------------------------------------------------------------

REQUESTS = ["a", "b", "c"]
STEP = st.one_of(
    st.tuples(st.just("request"), st.sampled_from(REQUESTS)),
    st.tuples(st.just("sse"), st.sampled_from(REQUESTS)),
    st.tuples(
        st.just("end"),
        st.sampled_from(REQUESTS),
        st.sampled_from(list(Outcome)),
        st.sampled_from(["stop", "tool_calls", "length", None]),
    ),
)
STEPS = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=200.0), STEP), min_size=1, max_size=30
)


def play(steps: list[tuple[float, tuple[object, ...]]]) -> tuple[Session, float]:
    """The steps as a session's observed changes, each `gap` seconds after the one before; a
    change that cannot happen (a stream of a request not open) is left out, as the observer
    never notes it."""
    session, now = Session(), 0.0
    for gap, step in steps:
        now += gap
        kind, request_id = step[0], str(step[1])
        record = session.records.get(request_id)
        is_open = record is not None and record.open
        if kind == "request" and not is_open:
            session.request(request_id, at=now)
        elif kind == "sse" and is_open and record.sse_opened_at is None:  # type: ignore[union-attr]
            session.sse_opened(request_id, at=now)
        elif kind == "end" and is_open:
            outcome, reason = step[2], step[3]
            session.ended(request_id, at=now, outcome=outcome, reason=reason)  # type: ignore[arg-type]
    return session, now


@settings(max_examples=400, deadline=None)
@given(STEPS, st.floats(min_value=0.0, max_value=400.0))
def test_an_open_stream_or_an_active_run_is_never_an_allow(
    steps: list[tuple[float, tuple[object, ...]]], later: float
) -> None:
    session, now = play(steps)
    at = now + later
    decided = decide(session, at)
    if any(record.streaming for record in session.records.values()):
        assert decided == (SKIP, "sse_open")
    assert decide(session, at, RUN)[0] == SKIP  # type: ignore[index]


@settings(max_examples=400, deadline=None)
@given(STEPS)
def test_without_open_streams_or_runs_a_session_is_never_skipped_past_the_timeout(
    steps: list[tuple[float, tuple[object, ...]]],
) -> None:
    session, now = play(steps)
    if not session.records:  # nothing observed: the fallback's turn
        assert decide(session, now) is None
        return
    if any(record.streaming for record in session.records.values()):
        return
    settled = now + max(SETTINGS.response_timeout, SETTINGS.grace) + 0.001
    assert decide(session, settled) is not None
    assert decide(session, settled)[0] == ALLOW  # type: ignore[index]
