"""`decide`: what follows the end of a run's attempt, from the facts alone.

The one home of the rules by which a run ends, for the runs the gateway drives
(`decisions.py` carries the decisions out) and for those an app writes itself
(`gateway_kit.app_runs.guards`):

- a `Finish` of a cancelled run ends it as cancelled, whatever its guards would say;
- a `Finish` no finish guard vetoes ends the run with that `Finish`;
- a veto asks for a follow-up turn naming what is missing (`follow_ups.py`), while the run has
  had fewer than `max_follow_ups` of them and a follow-up can be asked for at all; past that,
  or at once when a guard failed (`GuardFailure`: it checked nothing, and no turn of the agent
  can change that), the run ends with a `Finish` flagged ``guard_failed``, after a
  `guard_failed` event (`vetoes.py`);
- a failure (goose's `Error`, a request lost upstream) of a run that is not cancelled, whose
  error was classified and for which a `RecoveryPlan` was made, is retried after the plan's
  delay while the run has had fewer than the plan's `retries` recoveries of its kind; else the
  run ends with an `Error` naming the error and its class.

`decide` does no I/O: its caller asks the hooks (`Plugins.finish_guard`, `classify_error`,
`plan_recovery`), counts the run's attempts, and then does what the decision says.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..hooks.results import GuardVeto, RecoveryPlan
from ..log.event import ERROR, FINISH
from .follow_ups import follow_up_prompt
from .model import Attempt, AttemptKind, RunStatus
from .vetoes import any_failed, flagged_finish, guard_failed_data

STOP = {"reason": "stop"}


# --- the facts -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Finished:
    """The attempt ended with a `Finish`: goose's, or the app's turn's.

    :param data: the run's `Finish` data, should its guards pass.
    """

    data: Mapping[str, Any] = field(default_factory=lambda: dict(STOP))


@dataclass(frozen=True, slots=True)
class Failed:
    """The attempt failed: goose's `Error`, or its request lost or refused upstream."""

    error: str


@dataclass(frozen=True, slots=True)
class Facts:
    """What is known when a run's attempt has ended.

    :param ended: how the attempt ended.
    :param cancelled: a cancel of the run was asked for.
    :param vetoes: the finish guards' vetoes of a `Finished` attempt.
    :param follow_ups: the follow-up turns the run has had.
    :param max_follow_ups: the follow-up turns a run may have (`LifecycleSettings`; none
        unless given).
    :param can_follow_up: whether a follow-up turn can be asked for at all (an app's run
        without a `follow_up` cannot).
    :param error_class: `classify_error`'s class of a `Failed` attempt's error.
    :param plan: `plan_recovery`'s plan for that class.
    :param tried: the recoveries of the plan's kind the run has had.
    """

    ended: Finished | Failed
    cancelled: bool = False
    vetoes: Sequence[GuardVeto] = ()
    follow_ups: int = 0
    max_follow_ups: int = 0
    can_follow_up: bool = True
    error_class: str | None = None
    plan: RecoveryPlan | None = None
    tried: int = 0


def follow_ups_of(attempts: Sequence[Attempt]) -> int:
    """The follow-up turns among a run's attempts."""
    return sum(1 for attempt in attempts if attempt.kind is AttemptKind.FOLLOW_UP)


def tries_of(attempts: Sequence[Attempt], kind: str) -> int:
    """The recoveries of `kind` among a run's attempts."""
    return sum(1 for attempt in attempts if attempt.recovery == kind)


# --- the decisions ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class End:
    """End the run: its terminal event of `type` (`Finish` or `Error`) with `data`, and its
    `status`. `guard_failed`: the data of the `guard_failed` event written just before, when
    its guards gave up."""

    type: str
    data: dict[str, Any]
    status: RunStatus
    guard_failed: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class FollowUp:
    """Ask for a follow-up turn with `prompt`, for the vetoes' `reasons` and `missing` items."""

    prompt: str
    reasons: list[str]
    missing: list[str]


@dataclass(frozen=True, slots=True)
class Retry:
    """Retry the attempt as `plan` says, its try number `try_number` of the plan's kind, after
    `delay` seconds; `instead` ends the run should the retry not start."""

    plan: RecoveryPlan
    error_class: str
    try_number: int
    delay: float
    instead: End


Decision = End | FollowUp | Retry

# A run whose cancel was asked for, and whose attempt ended or never started.
CANCELLED = End(FINISH, {"reason": "cancelled"}, RunStatus.CANCELLED)


def failed(error: str, error_class: str | None = None) -> End:
    """The end of a run that failed with `error` (of `error_class`, if it was classified)."""
    return End(ERROR, {"error": error, "error_class": error_class}, RunStatus.FAILED)


def decide(facts: Facts) -> Decision:
    """What follows the end of a run's attempt (see the module docstring)."""
    if isinstance(facts.ended, Finished):
        return _after_finish(facts, facts.ended)
    return _after_failure(facts, facts.ended)


def _after_finish(facts: Facts, finished: Finished) -> End | FollowUp:
    if facts.cancelled:
        return CANCELLED
    if not facts.vetoes:
        return End(FINISH, dict(finished.data), RunStatus.FINISHED)
    prompt, reasons, missing = follow_up_prompt(facts.vetoes)
    if (
        facts.can_follow_up
        and facts.follow_ups < facts.max_follow_ups
        and not any_failed(facts.vetoes)
    ):
        return FollowUp(prompt, reasons, missing)
    gave_up = guard_failed_data(reasons, missing, facts.follow_ups)
    return End(FINISH, flagged_finish(finished.data), RunStatus.FINISHED, gave_up)


def _after_failure(facts: Facts, failure: Failed) -> End | Retry:
    if facts.cancelled or facts.error_class is None:
        return failed(failure.error)
    ending = failed(failure.error, facts.error_class)
    plan = facts.plan
    if plan is None or facts.tried >= plan.retries:
        return ending
    return Retry(plan, facts.error_class, facts.tried + 1, plan.delay, ending)
