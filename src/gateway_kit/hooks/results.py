"""What hooks hand back to the gateway, besides plain values."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GuardVeto:
    """A finish guard's "not done yet": the run gets a follow-up turn naming `reason` and
    exactly the `missing` items (files not written, assets not found, ...)."""

    reason: str
    missing: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.reason, str) or not self.reason.strip():
            raise ValueError(f"a veto needs a reason, got {self.reason!r}")
        if isinstance(self.missing, str):
            raise ValueError("missing is a list of items, not one string")
        object.__setattr__(self, "missing", tuple(str(item) for item in self.missing))
