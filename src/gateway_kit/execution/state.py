"""A tmux session's execution state, folded from the requests observed for it.

Each observed request is one `RequestRecord`: when it started, when its SSE stream opened,
when and how it ended. `fold` turns a session's records into its `ExecutionState` at a given
time; the time matters, because two transitions happen by waiting alone (a request without a
response goes stale after the response timeout, a grace after a non-``stop`` answer runs out).

    request                              → WAITING_RESPONSE
    its SSE stream opens                 → STREAMING_OPEN (while any stream is open)
    response ends with ``stop``          → IDLE
    response ends with another reason    → POST_RESPONSE_GRACE, then IDLE once the grace is over
    no response within the timeout       → STALED
    client left, or the response broke,
      before its terminal event          → STALED
    no record at all                     → UNKNOWN

A request during a grace, or after a stale one, is the newest event: WAITING_RESPONSE again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from ..settings import check_seconds

DEFAULT_RESPONSE_TIMEOUT = 120.0
DEFAULT_GRACE = 5.0

STOP = "stop"


class State(StrEnum):
    IDLE = "IDLE"
    WAITING_RESPONSE = "WAITING_RESPONSE"
    STREAMING_OPEN = "STREAMING_OPEN"
    POST_RESPONSE_GRACE = "POST_RESPONSE_GRACE"
    STALED = "STALED"
    UNKNOWN = "UNKNOWN"


class Outcome(StrEnum):
    """How an observed response ended."""

    COMPLETED = "completed"  # its terminal event, or the whole of a non-stream answer
    CLIENT_CLOSED = "client_closed"  # the client left before the terminal event
    CUT = "cut"  # the stream ended without a terminal event
    ERROR = "error"  # the app failed, or the answer says it did
    PROCESS_GONE = "process_gone"  # the process serving it stopped while it was open


@dataclass(frozen=True, slots=True)
class Timings:
    """:param response_timeout: seconds a request may wait for its response before the
        session counts as stale (a request inside it keeps heartbeats away).
    :param grace: seconds after a response that ended with another reason than ``stop``
        (``tool_calls``, ``length``) before the session counts as idle: the agent's next
        request usually follows at once.
    """

    response_timeout: float = DEFAULT_RESPONSE_TIMEOUT
    grace: float = DEFAULT_GRACE

    def __post_init__(self) -> None:
        check_seconds("response_timeout", self.response_timeout)
        check_seconds("grace", self.grace)


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """One observed request: as its process's recorder last noted it (each change makes a new
    record), and as that process last wrote it."""

    request_id: str
    tmux_session: str
    process: str
    method: str
    path: str
    started_at: float
    sse_opened_at: float | None = None
    ended_at: float | None = None
    outcome: str | None = None
    finish_reason: str | None = None
    terminal_at: float | None = None

    @property
    def open(self) -> bool:
        return self.ended_at is None

    @property
    def streaming(self) -> bool:
        return self.sse_opened_at is not None and self.ended_at is None


@dataclass(frozen=True, slots=True)
class ExecutionState:
    """What is known of one tmux session's execution at `at`: its `state` and the evidence it
    was folded from (times are epoch seconds)."""

    tmux_session_id: str
    state: State
    at: float
    last_request_id: str | None = None
    last_request_at: float | None = None
    last_request_was_stream: bool = False
    open_sse_count: int = 0
    waiting_count: int = 0
    last_sse_open_at: float | None = None
    last_sse_close_at: float | None = None
    last_response_at: float | None = None
    last_outcome: str | None = None
    last_finish_reason: str | None = None
    last_terminal_at: float | None = None
    last_client_close_before_terminal: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "tmux_session_id": self.tmux_session_id,
            "state": self.state.value,
            "last_request_id": self.last_request_id,
            "last_request_at": self.last_request_at,
            "last_request_was_stream": self.last_request_was_stream,
            "open_sse_count": self.open_sse_count,
            "waiting_count": self.waiting_count,
            "last_sse_open_at": self.last_sse_open_at,
            "last_sse_close_at": self.last_sse_close_at,
            "last_response_at": self.last_response_at,
            "last_outcome": self.last_outcome,
            "last_finish_reason": self.last_finish_reason,
            "last_terminal_at": self.last_terminal_at,
            "last_client_close_before_terminal": self.last_client_close_before_terminal,
        }


def _latest(values: Iterable[float | None]) -> float | None:
    present = [value for value in values if value is not None]
    return max(present) if present else None


def fold(
    tmux_session_id: str,
    records: Iterable[RequestRecord],
    now: float,
    timings: Timings = Timings(),  # frozen, shared safely
) -> ExecutionState:
    """The state of a tmux session at `now`, from its request `records` (any order; the open
    ones of processes that stopped must already be ended, `Outcome.PROCESS_GONE`)."""
    records = sorted(records, key=lambda record: (record.started_at, record.request_id))
    if not records:
        return ExecutionState(tmux_session_id, State.UNKNOWN, now)
    last = records[-1]
    ended = [record for record in records if not record.open]
    newest_end = max(ended, key=lambda record: record.ended_at or 0.0) if ended else None
    open_sse = sum(1 for record in records if record.streaming)
    # Several requests may wait at once; each keeps the session busy within the timeout.
    waiting = sum(
        1
        for record in records
        if record.open
        and record.sse_opened_at is None
        and now - record.started_at < timings.response_timeout
    )
    client_closed = newest_end is not None and newest_end.outcome == Outcome.CLIENT_CLOSED
    state = _state(last, newest_end, open_sse, waiting, now, timings)
    return ExecutionState(
        tmux_session_id=tmux_session_id,
        state=state,
        at=now,
        last_request_id=last.request_id,
        last_request_at=last.started_at,
        last_request_was_stream=last.sse_opened_at is not None,
        open_sse_count=open_sse,
        waiting_count=waiting,
        last_sse_open_at=_latest(record.sse_opened_at for record in records),
        last_sse_close_at=_latest(
            record.ended_at for record in ended if record.sse_opened_at is not None
        ),
        last_response_at=None if newest_end is None else newest_end.ended_at,
        last_outcome=None if newest_end is None else newest_end.outcome,
        last_finish_reason=None if newest_end is None else newest_end.finish_reason,
        last_terminal_at=_latest(record.terminal_at for record in records),
        last_client_close_before_terminal=client_closed,
    )


def _state(
    last: RequestRecord,
    newest_end: RequestRecord | None,
    open_sse: int,
    waiting: int,
    now: float,
    timings: Timings,
) -> State:
    if open_sse:
        return State.STREAMING_OPEN
    if waiting:
        return State.WAITING_RESPONSE
    # Nothing open within its time: the newest event decides, a request or a response.
    if newest_end is None or (last.open and last.started_at >= (newest_end.ended_at or 0.0)):
        return State.STALED  # the newest request got no response within the timeout
    if newest_end.outcome != Outcome.COMPLETED:
        return State.STALED
    reason = newest_end.finish_reason
    if reason is None or reason == STOP:
        return State.IDLE
    ended_at = newest_end.ended_at or 0.0
    return State.POST_RESPONSE_GRACE if now - ended_at < timings.grace else State.IDLE
