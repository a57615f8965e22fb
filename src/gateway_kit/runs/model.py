"""A run: one agent turn, owned by the gateway, never by a client connection."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class RunStatus(StrEnum):
    ACTIVE = "active"
    FINISHED = "finished"  # the run's Finish: every guard passed or gave up
    FAILED = "failed"  # the run's Error: upstream failed and no recovery was left
    CANCELLED = "cancelled"  # cancelled, then goose's Finish arrived


class AttemptKind(StrEnum):
    INITIAL = "initial"  # the run's own message
    FOLLOW_UP = "follow_up"  # a finish guard vetoed: the same session, told what is missing
    RECOVERY = "recovery"  # a recovery plan after an upstream error


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    stream: str
    session_id: str
    upstream_request_id: str  # the current attempt's request id, sent with goose's `reply`
    status: RunStatus
    attempt: int  # how many attempts the run has had (the current one's number)
    cancel_requested: bool
    message: str
    created_at: float
    finished_at: float | None = None
    started_by: str | None = None  # the user who started it through the gateway

    @property
    def active(self) -> bool:
        return self.status is RunStatus.ACTIVE


@dataclass(frozen=True, slots=True)
class Attempt:
    """One goose request of a run: its first turn, a follow-up, or a recovery."""

    run_id: str
    number: int
    upstream_request_id: str
    session_id: str
    kind: AttemptKind
    recovery: str | None  # the recovery plan's kind, for a recovery
    reason: str | None  # why it was made: the veto's reasons, or the error's class
    started_at: float
    recovery_try: int | None = None  # for a recovery: its number among those of its kind


@dataclass(frozen=True, slots=True)
class Bill:
    """A run's billing record, written with its terminal event; delivered to `bill_run`."""

    run_id: str
    idempotency_key: str
    stream: str
    status: str
    usage: dict[str, Any]
    created_at: float
    tries: int
    delivered_at: float | None
    last_error: str | None
