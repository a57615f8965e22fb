"""`HeartbeatDecider`: may a heartbeat be typed into a tmux session's pane now?

The answer comes from what the gateway saw, in this order:

1. a ``heartbeat_policy`` plugin's answer, when one gives it;
2. an open SSE stream, a pending approval or an active run of a bound stream → skip;
3. a request waiting for its response within the timeout → skip;
4. a response that ended with another reason than ``stop``, within the grace → skip;
5. the newest response ended with ``stop`` → allow;
6. the newest response ended with another reason (``tool_calls``, ``length``) and its grace is
   over → allow only if the pane reads idle (below): the agent may be running the tool, or
   asking for permission to;
7. the newest request got no response within the timeout, or its response broke off (the
   client left, the stream was cut, the app failed, its process died) → allow: a session is
   never skipped for ever;
8. nothing observed (``UNKNOWN``, such as sessions older than the gateway) → the
   ``heartbeat_fallback`` plugins (the built-in one reads the pane); none answering → skip.

The pane is the last word before any allow, whoever made it: the ``heartbeat_fallback``
plugins are asked, and anything but ``"allow"`` (a permission prompt, a busy agent, a screen
they cannot read, a plugin that fails or is slow) turns it into a skip. Only when no fallback
plugin gives an answer at all (none is configured) does an allow stand on the traffic alone.

"Client daemon alive" is never an input. Every decision is recorded with its reason and the
evidence it was made from (`DecisionLog`), whoever asked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..bindings.names import tmux_session_problem
from ..exceptions import GatewayKitError
from ..hooks import Plugins
from ..log import EventLog
from .decision_log import DecisionLog
from .recorder import ExecutionRecorder
from .request_rows import RequestRows
from .settings import ExecutionSettings
from .state import ExecutionState, Outcome, State, fold
from .work import ActiveWork, Work

logger = logging.getLogger(__name__)

ALLOW = "allow"
SKIP = "skip"

# Why, in words an operator reads; the key is the decision's ``reason``.
REASONS = {
    "policy": "a heartbeat_policy plugin decided",
    "sse_open": "{count} SSE stream(s) still open",
    "run_active": "run(s) {runs} of bound streams still going",
    "approval_pending": "approval(s) {approvals} waiting for a human",
    "waiting_response": "a request is waiting for its response ({age:.1f} s of {timeout:g} s)",
    "post_response_grace": "the last response ended with {reason!r}; the agent may go on "
    "({age:.1f} s of the {grace:g} s grace)",
    "response_stop": "the last response ended with {reason} and nothing newer came",
    "grace_over": "the last response ended with {reason!r} and no request came within the grace",
    "request_timed_out": "the last request got no response within {timeout:g} s",
    "client_closed": "the client left before the last response's terminal event",
    "stream_cut": "the last stream ended without a terminal event",
    "response_error": "the last response failed",
    "process_gone": "the process serving the last request stopped",
    "fallback": "nothing was observed of this session; a heartbeat_fallback plugin decided",
    "no_evidence": "nothing was observed of this session and no fallback plugin decided",
    "pane_not_idle": "{allowed}; but the pane does not read as idle (a prompt, a busy agent, or "
    "a screen that cannot be read)",
    "ending_unconfirmed": "{allowed}; but no pane reader confirms the agent is idle, and after "
    "{reason!r} it may be running a tool or asking for permission",
}
PANE_IDLE = "{detail}; the pane reads idle"
# Allowed by the traffic, but only with the pane's word: the answer ended asking for more.
NEEDS_THE_PANE = frozenset({"grace_over"})
BROKEN_OFF = {
    Outcome.CLIENT_CLOSED.value: "client_closed",
    Outcome.CUT.value: "stream_cut",
    Outcome.ERROR.value: "response_error",
    Outcome.PROCESS_GONE.value: "process_gone",
}
NOT_RECORDED = "recording the heartbeat decision about %r failed; it was answered anyway"


class InvalidTmuxSession(GatewayKitError, ValueError):
    """Not a tmux session id."""


@dataclass(frozen=True, slots=True)
class HeartbeatDecision:
    """A decision, its reason (a key of `REASONS`), who made it (``gateway``, ``policy`` or
    ``fallback``) and what it was made from."""

    tmux_session_id: str
    decision: str
    reason: str
    detail: str
    decided_by: str
    decided_at: float
    state: ExecutionState
    work: Work
    pane: str | None = None  # what the heartbeat_fallback plugins answered, when asked

    @property
    def allowed(self) -> bool:
        return self.decision == ALLOW

    def as_json(self) -> dict[str, Any]:
        return {
            "tmux_session_id": self.tmux_session_id,
            "state": self.state.state.value,
            "decision": self.decision,
            "reason": self.reason,
            "detail": self.detail,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at,
            "evidence": {**self.state.as_json(), **self.work.as_json(), "pane": self.pane},
        }


def check_tmux_session(value: object) -> str:
    problem = tmux_session_problem(value)
    if problem is not None:
        raise InvalidTmuxSession(problem)
    return value  # type: ignore[return-value]


def named(items: tuple[str, ...], shown: int = 3) -> str:
    """The first few of `items`, and how many more (a detail stays a line however many)."""
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def built_in(
    state: ExecutionState, work: Work, settings: ExecutionSettings
) -> tuple[str, str, str] | None:
    """(decision, reason, detail) by the gateway's own order; None for ``UNKNOWN`` with no
    work going on (the fallback's turn)."""
    now = state.at
    if state.open_sse_count:
        return SKIP, "sse_open", REASONS["sse_open"].format(count=state.open_sse_count)
    # A run waiting for a person says more than the run being active: it is named first.
    if work.pending_approvals:
        approvals = named(work.pending_approvals)
        return SKIP, "approval_pending", REASONS["approval_pending"].format(approvals=approvals)
    if work.active_runs:
        runs = named(work.active_runs)
        return SKIP, "run_active", REASONS["run_active"].format(runs=runs)
    if state.state is State.WAITING_RESPONSE:
        age = now - (state.last_request_at or now)
        detail = REASONS["waiting_response"].format(age=age, timeout=settings.response_timeout)
        return SKIP, "waiting_response", detail
    reason = state.last_finish_reason
    if state.state is State.POST_RESPONSE_GRACE:
        age = now - (state.last_response_at or now)
        detail = REASONS["post_response_grace"].format(reason=reason, age=age, grace=settings.grace)
        return SKIP, "post_response_grace", detail
    if state.state is State.IDLE:
        if reason is None or reason == "stop":
            shown = "stop" if reason else "a complete answer"
            return ALLOW, "response_stop", REASONS["response_stop"].format(reason=shown)
        return ALLOW, "grace_over", REASONS["grace_over"].format(reason=reason)
    if state.state is State.STALED:
        newest_is_request = state.last_response_at is None or (
            state.last_request_at is not None and state.last_request_at > state.last_response_at
        )
        key = (
            "request_timed_out"
            if newest_is_request
            else BROKEN_OFF.get(state.last_outcome or "", "response_error")
        )
        return ALLOW, key, REASONS[key].format(timeout=settings.response_timeout)
    return None


class HeartbeatDecider:
    """:param log: where the observed requests, bindings and decisions are.
    :param plugins: the gateway's plugins (``heartbeat_policy``, ``heartbeat_fallback``).
    :param settings: the timings.
    :param recorder: this process's recorder, flushed before each decision so that what this
        process saw is in it.
    :param work: what else keeps a session busy (active runs, pending approvals), as their
        keepers hand it in; by default the bindings alone, with no run nor approval to read.
    :param clock: the time of decisions (epoch seconds).
    """

    def __init__(
        self,
        log: EventLog,
        plugins: Plugins,
        *,
        settings: ExecutionSettings | None = None,
        recorder: ExecutionRecorder | None = None,
        rows: RequestRows | None = None,
        work: ActiveWork | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.log = log
        self.plugins = plugins
        self.settings = settings or ExecutionSettings()
        self.recorder = recorder
        self.rows = rows or (
            recorder.rows
            if recorder is not None
            else RequestRows(log, process_ttl=self.settings.process_ttl)
        )
        self.work = work or ActiveWork(log)
        self.decisions = DecisionLog(log)
        self.clock = clock

    def _read(self, tmux_session_id: str, now: float) -> tuple[ExecutionState, Work]:
        records = self.rows.read(tmux_session_id, now)
        state = fold(tmux_session_id, records, now, self.settings.timings)
        return state, self.work.of(tmux_session_id)

    async def state(self, tmux_session_id: str) -> ExecutionState:
        """The session's execution state now, without deciding anything."""
        check_tmux_session(tmux_session_id)
        if self.recorder is not None:
            await self.recorder.flush()
        now = self.clock()
        state, _ = await asyncio.to_thread(self._read, tmux_session_id, now)
        return state

    async def decide(self, tmux_session_id: str) -> HeartbeatDecision:
        """Decide, record and return a heartbeat decision about `tmux_session_id`.

        Raises `InvalidTmuxSession` for an id no tmux session can have, and the database's
        `DatabaseUnavailable` when the state cannot be read.
        """
        check_tmux_session(tmux_session_id)
        if self.recorder is not None:
            await self.recorder.flush()
        now = self.clock()
        state, work = await asyncio.to_thread(self._read, tmux_session_id, now)
        decision = await self._decide(state, work, now)
        try:
            await asyncio.to_thread(self.decisions.add, decision.as_json())
        except Exception:
            logger.exception(NOT_RECORDED, tmux_session_id)
        logger.info(
            "heartbeat %s for %r: %s (%s)",
            decision.decision,
            tmux_session_id,
            decision.reason,
            decision.detail,
        )
        return decision

    async def _decide(self, state: ExecutionState, work: Work, now: float) -> HeartbeatDecision:
        def made(
            decision: str, reason: str, detail: str, by: str, pane: str | None = None
        ) -> HeartbeatDecision:
            return HeartbeatDecision(
                state.tmux_session_id, decision, reason, detail, by, now, state, work, pane
            )

        overridden = await self.plugins.heartbeat_policy(state, now, timeout=self.plugins.timeout)
        if overridden is not None:
            candidate = made(overridden, "policy", REASONS["policy"], "policy")
        else:
            decided = built_in(state, work, self.settings)
            if decided is None:
                answer = await self._pane(state.tmux_session_id)
                if answer is None:
                    # Nobody knows whether the agent works: typing could interrupt it.
                    return made(SKIP, "no_evidence", REASONS["no_evidence"], "gateway")
                return made(answer, "fallback", REASONS["fallback"], "fallback", answer)
            candidate = made(*decided, "gateway")
        if not candidate.allowed:
            return candidate
        return await self._confirmed(candidate, made)

    async def _confirmed(
        self, candidate: HeartbeatDecision, made: Callable[..., HeartbeatDecision]
    ) -> HeartbeatDecision:
        """`candidate`, an allow, if the pane agrees; else a skip saying why."""
        pane = await self._pane(candidate.tmux_session_id)
        by, detail = candidate.decided_by, candidate.detail
        if pane == ALLOW:
            return made(ALLOW, candidate.reason, PANE_IDLE.format(detail=detail), by, pane)
        if pane is not None:
            return made(
                SKIP, "pane_not_idle", REASONS["pane_not_idle"].format(allowed=detail), by, pane
            )
        if candidate.reason in NEEDS_THE_PANE:
            reason = candidate.state.last_finish_reason
            explained = REASONS["ending_unconfirmed"].format(allowed=detail, reason=reason)
            return made(SKIP, "ending_unconfirmed", explained, by)
        return candidate

    async def _pane(self, tmux_session_id: str) -> str | None:
        """The ``heartbeat_fallback`` plugins' word on the session's pane: None when none
        answered, ``"skip"`` when they failed or were too slow."""
        return await self.plugins.heartbeat_fallback(
            tmux_session_id, timeout=self.settings.fallback_timeout
        )

    async def history(self, tmux_session_id: str, limit: int = 50) -> list[dict[str, Any]]:
        """The newest recorded decisions about `tmux_session_id`, newest first."""
        check_tmux_session(tmux_session_id)
        return await asyncio.to_thread(self.decisions.recent, tmux_session_id, limit)

    async def prune(self) -> None:
        """Forget ended requests and decisions older than the retention."""
        before = self.clock() - self.settings.retention
        await asyncio.to_thread(self.rows.prune, before)
        await asyncio.to_thread(self.decisions.prune, before)
