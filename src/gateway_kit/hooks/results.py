"""What hooks hand back to the gateway, besides plain values."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from math import inf
from typing import Any

# Marks the second and later recoveries of one kind where they are stored (one row per try).
RECOVERY_TRY_MARK = "#"


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


# The reason of a `GuardFailure`: the guard's name and how it failed.
GUARD_FAILED_REASON = "the finish guard {plugin!r} could not check the answer: it {how}"


@dataclass(frozen=True, slots=True)
class GuardFailure(GuardVeto):
    """What a finish guard that failed (raised, answered something else than ``None`` or a
    `GuardVeto`, or did not answer in time) counts as: a veto no follow-up turn can lift, for
    the guard did not check what it was asked to. The run ends ``guard_failed`` at once."""

    plugin: str | None = None

    @classmethod
    def of(cls, plugin: str | None, how: str) -> GuardFailure:
        return cls(GUARD_FAILED_REASON.format(plugin=plugin or "unknown", how=how), (), plugin)


@dataclass(frozen=True, slots=True)
class RecoveryPlan:
    """A `plan_recovery` answer: how a run tries again after a classified upstream error.

    :param kind: the recovery's name. A run gets at most `retries` recoveries of each kind;
        two kinds never share that budget.
    :param clean_session: start a new goose session for the retry (and for the conversation
        from then on), rather than retrying in the session that failed.
    :param context: goose ``Message``\\ s the new session starts from (goose's
        ``override_conversation``); only with `clean_session`.
    :param instructions: the retry's prompt; by default the failed attempt's prompt again (the
        run's own message, a follow-up's prompt, a recovery's instructions).
    :param tool_policy: goose ``extension_overrides`` for the new session (which tools it
        has); only with `clean_session`.
    :param drop_tools: the new session gets the failed session's extensions, less these tools
        (``read_image``: in any extension; ``developer__read_image``: in that one); an empty
        list keeps every tool. Only with `clean_session`, and not with `tool_policy`. The
        gateway reads the extensions and tools from goose; ``None`` (the default) leaves the
        new session goose's default extensions.
    :param retries: how many recoveries of this kind one run may have (1: once).
    :param delay: seconds to wait before the retry is sent; the run is not held meanwhile, and a
        cancel during the wait ends it as cancelled.
    """

    kind: str
    clean_session: bool = False
    context: Sequence[Mapping[str, Any]] = ()
    instructions: str | None = None
    tool_policy: Sequence[Mapping[str, Any]] | None = None
    drop_tools: Sequence[str] | None = None
    retries: int = 1
    delay: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.kind, str) or not self.kind.strip():
            raise ValueError(f"a recovery plan needs a kind, got {self.kind!r}")
        if RECOVERY_TRY_MARK in self.kind:
            raise ValueError(f"a recovery kind cannot hold {RECOVERY_TRY_MARK!r}: {self.kind!r}")
        if self.instructions is not None and not (
            isinstance(self.instructions, str) and self.instructions.strip()
        ):
            raise ValueError("instructions must be a non-empty string or None")
        chosen_tools = self.tool_policy is not None or self.drop_tools is not None
        if not self.clean_session and (self.context or chosen_tools):
            raise ValueError("context, tool_policy and drop_tools need clean_session=True")
        if self.tool_policy is not None and self.drop_tools is not None:
            raise ValueError("give tool_policy or drop_tools, not both")
        if isinstance(self.drop_tools, str):
            raise ValueError("drop_tools is a list of tool names, not one string")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 1:
            raise ValueError(f"retries must be an integer of at least 1, got {self.retries!r}")
        delay = self.delay
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay < inf:
            raise ValueError(f"delay must be a finite number of seconds >= 0, got {delay!r}")
        object.__setattr__(self, "context", tuple(dict(m) for m in self.context))
        if self.tool_policy is not None:
            object.__setattr__(self, "tool_policy", tuple(dict(t) for t in self.tool_policy))
        if self.drop_tools is not None:
            object.__setattr__(self, "drop_tools", tuple(str(t) for t in self.drop_tools))
        object.__setattr__(self, "delay", float(delay))
