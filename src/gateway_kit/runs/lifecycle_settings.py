"""How runs end, as settings: follow-ups, hook calls, billing, and the limits on goose's answers
and on a run's duration (`LifecycleSettings`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ..settings import (
    DEFAULT_CANCEL_DEADLINE,
    DEFAULT_MAX_RUN_DURATION,
    DEFAULT_REPLY_TIMEOUT,
    check_duration,
    check_seconds,
)
from .billing import BillingSettings


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    """:param max_follow_ups: follow-up turns a run may get from finish guards' vetoes.
    :param hook_timeout: seconds one call of a lifecycle hook (`finish_guard`,
        `classify_error`, `plan_recovery`) may take; after that the run goes on without it.
    :param billing: timings of the billing outbox.
    :param reply_timeout: seconds goose's answer to a `reply` (or a `cancel`) may take; a run
        start past it fails with a 504.
    :param cancel_deadline: seconds after a cancel within which goose's `Finish` must come;
        after that the gateway ends the run as cancelled itself.
    :param max_run_duration: seconds a run may go on (``inf``: no limit); after that the
        gateway cancels goose's request and ends the run with an `Error` saying so.
    """

    max_follow_ups: int = 2
    hook_timeout: float = 30.0
    billing: BillingSettings = field(default_factory=BillingSettings)
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT
    cancel_deadline: float = DEFAULT_CANCEL_DEADLINE
    max_run_duration: float = DEFAULT_MAX_RUN_DURATION

    def __post_init__(self) -> None:
        if isinstance(self.max_follow_ups, bool) or not isinstance(self.max_follow_ups, int):
            raise ValueError(f"max_follow_ups must be an integer, got {self.max_follow_ups!r}")
        if self.max_follow_ups < 0:
            raise ValueError(f"max_follow_ups must not be negative, got {self.max_follow_ups}")
        check_duration("hook_timeout", self.hook_timeout)
        check_seconds("reply_timeout", self.reply_timeout)
        check_seconds("cancel_deadline", self.cancel_deadline)
        check_duration("max_run_duration", self.max_run_duration)


def with_limits(
    settings: LifecycleSettings | None,
    *,
    reply_timeout: float | None = None,
    cancel_deadline: float | None = None,
    max_run_duration: float | None = None,
) -> LifecycleSettings:
    """`settings` (the defaults when None) with each limit given (not None) in its place."""
    base = settings or LifecycleSettings()
    return dataclasses.replace(
        base,
        reply_timeout=base.reply_timeout if reply_timeout is None else reply_timeout,
        cancel_deadline=base.cancel_deadline if cancel_deadline is None else cancel_deadline,
        max_run_duration=base.max_run_duration if max_run_duration is None else max_run_duration,
    )
