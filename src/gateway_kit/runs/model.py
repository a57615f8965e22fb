"""A run: one agent turn, owned by the gateway, never by a client connection."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class RunStatus(StrEnum):
    ACTIVE = "active"
    FINISHED = "finished"  # goose's Finish arrived
    FAILED = "failed"  # an Error, or goose lost the run
    CANCELLED = "cancelled"  # cancelled, then goose's Finish arrived


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    stream: str
    session_id: str
    upstream_request_id: str  # the request id sent with goose's `reply`
    status: RunStatus
    attempt: int
    cancel_requested: bool
    message: str
    created_at: float
    finished_at: float | None = None

    @property
    def active(self) -> bool:
        return self.status is RunStatus.ACTIVE


@dataclass(frozen=True, slots=True)
class SessionBinding:
    """Which goose session serves a stream, and where its current goosed lifetime began."""

    stream: str
    session_id: str
    lifetime_start_seq: int
