"""The usage ledger is a built-in: a `Gateway` loads it from this distribution's entry points.

An environment installed before `pyproject.toml` named it does not list that entry point yet;
there the fixture lists it as the installed distribution's own, exactly as a reinstall would,
so that these tests see the gateway a user gets (on by default, blocked by name).
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from gateway_kit.hooks import loading

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
NAME = "usage_ledger"


@pytest.fixture(autouse=True)
def usage_ledger_built_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real = metadata.entry_points
    if any(e.name == NAME for e in real(group=loading.ENTRY_POINT_GROUP)):
        yield
        return
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]["gateway_kit"]
    entry = metadata.EntryPoint(NAME, declared[NAME], loading.ENTRY_POINT_GROUP)
    entry = entry._for(metadata.distribution("gateway-kit"))  # type: ignore[attr-defined]

    def with_the_ledger(**selection: Any) -> Any:
        found = list(real(**selection))
        return [*found, entry] if selection.get("group") == loading.ENTRY_POINT_GROUP else found

    monkeypatch.setattr(loading.metadata, "entry_points", with_the_ledger)
    yield
