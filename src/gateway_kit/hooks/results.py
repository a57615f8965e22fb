"""What hooks hand back to the gateway, besides plain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


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


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """A `plan_recovery` answer: how a run tries again after a classified upstream error.

    :param kind: the recovery's name. A run gets at most one recovery of each kind; two kinds
        never share that budget.
    :param clean_session: start a new goose session for the retry (and for the conversation
        from then on), rather than retrying in the session that failed.
    :param context: goose ``Message``\\ s the new session starts from (goose's
        ``override_conversation``); only with `clean_session`.
    :param instructions: the retry's prompt; by default the run's own message again.
    :param tool_policy: goose ``extension_overrides`` for the new session (which tools it
        has); only with `clean_session`.
    """

    kind: str
    clean_session: bool = False
    context: Sequence[Mapping[str, Any]] = ()
    instructions: str | None = None
    tool_policy: Sequence[Mapping[str, Any]] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise ValueError(f"a recovery plan needs a kind, got {self.kind!r}")
        if self.instructions is not None and not (
            isinstance(self.instructions, str) and self.instructions.strip()
        ):
            raise ValueError("instructions must be a non-empty string or None")
        if not self.clean_session and (self.context or self.tool_policy is not None):
            raise ValueError("context and tool_policy need clean_session=True")
        object.__setattr__(self, "context", tuple(dict(m) for m in self.context))
        if self.tool_policy is not None:
            object.__setattr__(self, "tool_policy", tuple(dict(t) for t in self.tool_policy))
