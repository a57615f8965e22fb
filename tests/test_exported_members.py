"""The public API is re-exported from `gateway_kit` and `__all__` stays complete and sorted."""

from __future__ import annotations

import gateway_kit

# Objects made by a library that the package hands on under its own name.
MADE_ELSEWHERE = {"hookimpl"}


def test_all_is_sorted_and_complete() -> None:
    assert gateway_kit.__all__ == sorted(gateway_kit.__all__)
    public = {
        name
        for name, value in vars(gateway_kit).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("gateway_kit")
    }
    assert public | MADE_ELSEWHERE == set(gateway_kit.__all__)


def test_contract_names_are_exported() -> None:
    for name in ("EventLog", "Event", "Gateway", "GooseUpstream", "GuardVeto", "Principal"):
        assert name in gateway_kit.__all__
    assert gateway_kit.hookimpl.project_name == "gateway_kit"


def test_every_part_of_the_stack_is_exported() -> None:
    for name in ("IdentityMiddleware", "StreamRoutes", "RunRoutes", "LegacyTaskPoll", "Mount"):
        assert callable(getattr(gateway_kit, name))
