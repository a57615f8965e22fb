"""What a `RecoveryPlan` accepts: a plan that cannot be carried out is refused when made."""

from __future__ import annotations

from typing import Any

import pytest

from gateway_kit import RecoveryPlan


@pytest.mark.parametrize(
    "fields",
    [
        {"drop_tools": ["read_image"]},  # tools of a new session, without one
        {"clean_session": True, "drop_tools": ["read_image"], "tool_policy": []},
        {"clean_session": True, "drop_tools": "read_image"},
        {"retries": 0},
        {"retries": True},
        {"delay": -1},
        {"delay": float("inf")},
        {"delay": float("nan")},
        {"delay": "2"},
    ],
)
def test_plans_that_cannot_be_carried_out_are_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        RecoveryPlan("kind", **fields)


def test_a_kind_cannot_hold_the_mark_of_its_later_tries() -> None:
    with pytest.raises(ValueError):
        RecoveryPlan("retry#2")


def test_a_plan_keeps_its_tools_to_drop_and_its_budget() -> None:
    plan = RecoveryPlan("visual", clean_session=True, drop_tools=["read_image"], retries=2, delay=3)
    assert plan.drop_tools == ("read_image",) and plan.retries == 2 and plan.delay == 3.0
    assert RecoveryPlan("same").drop_tools is None  # goose's default extensions
    assert RecoveryPlan("all", clean_session=True, drop_tools=[]).drop_tools == ()
