"""How runs go and end, as settings: follow-ups, hook calls, billing, the limits on goose's
answers and on a run's duration, and how many runs one user may have going (`LifecycleSettings`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..exceptions import SettingsError
from ..settings import (
    DEFAULT_CANCEL_DEADLINE,
    DEFAULT_MAX_RUN_DURATION,
    DEFAULT_REPLY_TIMEOUT,
    check_duration,
    check_seconds,
)
from .billing import BillingSettings

# Runs one user may have active at once, over every stream and process: enough for a few tabs
# and agents at work, and a bound on what one user's never-ending runs cost everyone else.
DEFAULT_MAX_ACTIVE_RUNS_PER_USER = 8
# How long a reply goose refuses with "Session already has an active request" is sent again:
# a cancelled request goose lets go of a moment late, or one a cancel never reached. Shorter
# than a pump's `lost_run_grace` (5 s), so that no pump takes a run still being retried for one
# goose lost.
DEFAULT_BUSY_WAIT = 3.0


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    """:param max_follow_ups: follow-up turns a run may get from finish guards' vetoes.
    :param hook_timeout: seconds one call of a lifecycle hook (`finish_guard`,
        `classify_error`, `plan_recovery`) may take; after that the run goes on without it (a
        finish guard counts as failed: its run ends ``guard_failed``).
    :param billing: timings of the billing outbox.
    :param reply_timeout: seconds goose's answer to a `reply` (or a `cancel`) may take; a run
        start past it fails with a 504.
    :param cancel_deadline: seconds after a cancel within which goose's `Finish` must come;
        after that the gateway ends the run as cancelled itself.
    :param max_run_duration: seconds a run may go on (``inf``: no limit); after that the
        gateway cancels goose's request and ends the run with an `Error` saying so.
    :param max_active_runs_per_user: runs one user may have active at once, counted in the
        database over every stream and process; starting one more is refused (HTTP 429) until
        one ends.
    :param busy_wait: seconds a reply goose refuses because the session still holds another
        request (one the gateway is done with) is sent again, with growing pauses; the first
        retry of a run's start asks goose to drop the request of the session's previous run.
        Past it a start is refused (HTTP 409) as before.
    """

    max_follow_ups: int = 2
    hook_timeout: float = 30.0
    billing: BillingSettings = field(default_factory=BillingSettings)
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT
    cancel_deadline: float = DEFAULT_CANCEL_DEADLINE
    max_run_duration: float = DEFAULT_MAX_RUN_DURATION
    max_active_runs_per_user: int = DEFAULT_MAX_ACTIVE_RUNS_PER_USER
    busy_wait: float = DEFAULT_BUSY_WAIT

    def __post_init__(self) -> None:
        check_count("max_follow_ups", self.max_follow_ups, least=0)
        check_count("max_active_runs_per_user", self.max_active_runs_per_user, least=1)
        check_duration("hook_timeout", self.hook_timeout)
        check_seconds("reply_timeout", self.reply_timeout)
        check_seconds("cancel_deadline", self.cancel_deadline)
        check_duration("max_run_duration", self.max_run_duration)
        check_seconds("busy_wait", self.busy_wait)


def check_count(name: str, value: object, *, least: int) -> None:
    """A `SettingsError` unless `value` is an integer (not a bool) of at least `least`."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingsError(f"{name} must be an integer, got {value!r}")
    if value < least:
        raise SettingsError(f"{name} must be at least {least}, got {value}")
