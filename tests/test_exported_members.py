"""The public API is re-exported from `gateway_kit` and `__all__` stays complete and sorted."""

from __future__ import annotations

import gateway_kit


def test_all_is_sorted_and_complete() -> None:
    assert gateway_kit.__all__ == sorted(gateway_kit.__all__)
    public = {
        name
        for name, value in vars(gateway_kit).items()
        if not name.startswith("_") and getattr(value, "__module__", "").startswith("gateway_kit")
    }
    assert public == set(gateway_kit.__all__)


def test_contract_names_are_exported() -> None:
    for name in ("EventLog", "Event", "Gateway", "GooseUpstream"):
        assert name in gateway_kit.__all__
