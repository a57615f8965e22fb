"""A tmux session's requests as a test writes them: each call is one observed change, at a time
the test gives (no clock runs)."""

from __future__ import annotations

import dataclasses

from gateway_kit.execution.state import (
    ExecutionState,
    Outcome,
    RequestRecord,
    Timings,
    fold,
)

TMUX = "agent-1"


DEFAULT = Timings(response_timeout=120.0, grace=5.0)


class Session:
    def __init__(self, timings: Timings = DEFAULT) -> None:
        self.timings = timings
        self.records: dict[str, RequestRecord] = {}

    def request(self, request_id: str, at: float) -> Session:
        self.records[request_id] = RequestRecord(
            request_id, TMUX, "p1", "POST", "/v1/chat/completions", started_at=at
        )
        return self

    def sse_opened(self, request_id: str, at: float) -> Session:
        self._change(request_id, sse_opened_at=at)
        return self

    def ended(
        self,
        request_id: str,
        at: float,
        outcome: Outcome = Outcome.COMPLETED,
        reason: str | None = "stop",
    ) -> Session:
        terminal = at if outcome is Outcome.COMPLETED and reason is not None else None
        self._change(
            request_id,
            ended_at=at,
            outcome=outcome.value,
            finish_reason=reason,
            terminal_at=terminal,
        )
        return self

    def _change(self, request_id: str, **changes: object) -> None:
        self.records[request_id] = dataclasses.replace(self.records[request_id], **changes)

    def at(self, now: float) -> ExecutionState:
        return fold(TMUX, self.records.values(), now, self.timings)
