"""`decide`: what the end of a run's attempt leads to, from the facts alone, the same for the
gateway's runs and the app's."""

from __future__ import annotations

import pytest

from gateway_kit import GuardVeto, RecoveryPlan
from gateway_kit.hooks import GuardFailure
from gateway_kit.runs.ending import (
    CANCELLED,
    Decision,
    End,
    Facts,
    Failed,
    Finished,
    FollowUp,
    Retry,
    decide,
    failed,
    follow_ups_of,
    tries_of,
)
from gateway_kit.runs.follow_ups import follow_up_prompt
from gateway_kit.runs.model import Attempt, AttemptKind, RunStatus

PAGE_VETO = GuardVeto("the page is not written", missing=["public/report.html"])
BROKEN = GuardFailure.of("pages", "raised OSError: the disk is gone")
PROMPT, REASONS, MISSING = follow_up_prompt([PAGE_VETO])
ASK_AGAIN = FollowUp(PROMPT, REASONS, MISSING)
STOPPED = End("Finish", {"reason": "stop"}, RunStatus.FINISHED)
BACKOFF = RecoveryPlan("backoff", retries=2, delay=1.5)
OVERLOADED = failed("goose: 529", "overloaded")


def gave_up(follow_ups: int, *vetoes: GuardVeto, data: dict[str, object] | None = None) -> End:
    _, reasons, missing = follow_up_prompt(vetoes)
    guard_failed = {
        "type": "guard_failed",
        "reasons": reasons,
        "missing": missing,
        "follow_ups": follow_ups,
    }
    flagged = {**(data or {"reason": "stop"}), "guard_failed": True}
    return End("Finish", flagged, RunStatus.FINISHED, guard_failed)


TABLE: list[tuple[str, Facts, Decision]] = [
    ("no veto: the Finish", Facts(Finished(), max_follow_ups=2), STOPPED),
    (
        "no veto of an app's turn: its own Finish data",
        Facts(Finished({"reason": "done", "pages": 3}), max_follow_ups=2),
        End("Finish", {"reason": "done", "pages": 3}, RunStatus.FINISHED),
    ),
    ("cancelled: the guards do not count", Facts(Finished(), cancelled=True), CANCELLED),
    (
        "cancelled, vetoed all the same",
        Facts(Finished(), cancelled=True, vetoes=[PAGE_VETO], max_follow_ups=2),
        CANCELLED,
    ),
    ("a veto: a follow-up", Facts(Finished(), vetoes=[PAGE_VETO], max_follow_ups=2), ASK_AGAIN),
    (
        "a veto with follow-ups left",
        Facts(Finished(), vetoes=[PAGE_VETO], follow_ups=1, max_follow_ups=2),
        ASK_AGAIN,
    ),
    (
        "a veto past the follow-ups: guard_failed",
        Facts(Finished(), vetoes=[PAGE_VETO], follow_ups=2, max_follow_ups=2),
        gave_up(2, PAGE_VETO),
    ),
    (
        "a veto, no follow-up allowed",
        Facts(Finished(), vetoes=[PAGE_VETO], max_follow_ups=0),
        gave_up(0, PAGE_VETO),
    ),
    (
        "a veto of an app's run without follow_up: guard_failed, its data flagged",
        Facts(Finished({"n": 1}), vetoes=[PAGE_VETO], max_follow_ups=2, can_follow_up=False),
        gave_up(0, PAGE_VETO, data={"n": 1}),
    ),
    (
        "a guard that failed: guard_failed at once, follow-ups left or not",
        Facts(Finished(), vetoes=[PAGE_VETO, BROKEN], max_follow_ups=2),
        gave_up(0, PAGE_VETO, BROKEN),
    ),
    ("an error not classified", Facts(Failed("goose: 500")), failed("goose: 500")),
    (
        "a class and no plan",
        Facts(Failed("goose: 529"), error_class="overloaded"),
        OVERLOADED,
    ),
    (
        "a class and a plan: a retry after its delay",
        Facts(Failed("goose: 529"), error_class="overloaded", plan=BACKOFF),
        Retry(BACKOFF, "overloaded", 1, 1.5, OVERLOADED),
    ),
    (
        "the plan's second try",
        Facts(Failed("goose: 529"), error_class="overloaded", plan=BACKOFF, tried=1),
        Retry(BACKOFF, "overloaded", 2, 1.5, OVERLOADED),
    ),
    (
        "the plan's tries spent",
        Facts(Failed("goose: 529"), error_class="overloaded", plan=BACKOFF, tried=2),
        OVERLOADED,
    ),
    (
        "cancelled: no class, no retry",
        Facts(Failed("goose: 529"), cancelled=True, error_class="overloaded", plan=BACKOFF),
        failed("goose: 529"),
    ),
]


@pytest.mark.parametrize(
    ("facts", "decision"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_decide(facts: Facts, decision: Decision) -> None:
    assert decide(facts) == decision


def test_the_end_of_a_failure_names_its_error_and_class() -> None:
    assert OVERLOADED.type == "Error" and OVERLOADED.status is RunStatus.FAILED
    assert OVERLOADED.data == {"error": "goose: 529", "error_class": "overloaded"}


def test_a_follow_up_names_each_reason_and_missing_item_once() -> None:
    other = GuardVeto("the chart is not drawn", missing=["public/report.html", "chart.svg"])
    facts = Facts(Finished(), vetoes=[PAGE_VETO, other, PAGE_VETO], max_follow_ups=1)
    decision = decide(facts)
    assert isinstance(decision, FollowUp)
    assert decision.reasons == ["the page is not written", "the chart is not drawn"]
    assert decision.missing == ["public/report.html", "chart.svg"]
    assert "- chart.svg" in decision.prompt


def attempt(number: int, kind: AttemptKind, recovery: str | None = None) -> Attempt:
    return Attempt("r-1", number, f"q-{number}", "s-1", kind, recovery, None, 0.0)


def test_the_budgets_are_counted_from_the_runs_attempts() -> None:
    attempts = [
        attempt(1, AttemptKind.INITIAL),
        attempt(2, AttemptKind.FOLLOW_UP),
        attempt(3, AttemptKind.RECOVERY, "backoff"),
        attempt(4, AttemptKind.RECOVERY, "fresh_session"),
        attempt(5, AttemptKind.FOLLOW_UP),
        attempt(6, AttemptKind.RECOVERY, "backoff"),
    ]
    assert follow_ups_of(attempts) == 2
    assert (tries_of(attempts, "backoff"), tries_of(attempts, "other")) == (2, 0)
