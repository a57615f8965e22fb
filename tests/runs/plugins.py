"""Plugins the run tests give a gateway: guards, recovery planners and a ledger that record
what they were asked."""

from __future__ import annotations

import threading
from typing import Any

from gateway_kit_plugins.tool_history_recovery import ToolHistoryRecovery
from gateway_kit_plugins.transient_retry import TransientRetry
from gateway_kit_plugins.visual_fallback import VisualFallback

from gateway_kit import Event, GuardVeto, RecoveryPlan, hookimpl

MISSING_FILE = "report.pdf"


class VetoOnce:
    """A guard that finds the report missing after the first turn, and present after."""

    __name__ = "veto-once"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    @hookimpl
    def finish_guard(self, run: Any, events: list[Event]) -> GuardVeto | None:
        self.calls.append([e.type for e in events])
        if len(self.calls) == 1:
            return GuardVeto("the report was not written", missing=[MISSING_FILE])
        return None


class Recoveries:
    """Classifies the text-only model's error and plans each recovery kind it knows."""

    __name__ = "recoveries"

    def __init__(self, plans: list[RecoveryPlan]) -> None:
        self.plans = plans
        self.classified: list[str] = []
        self.planned: list[tuple[str, int]] = []

    @hookimpl
    def classify_error(self, error: str, run: Any) -> str | None:
        self.classified.append(error)
        return "SESSION_VISUAL_CONTEXT_UNSUPPORTED" if "image_url" in error else None

    @hookimpl
    def plan_recovery(self, error_class: str, run: Any, attempts: list[Any]) -> RecoveryPlan:
        self.planned.append((error_class, len(attempts)))
        return self.plans[min(len(self.planned), len(self.plans)) - 1]


class Ledger:
    """A consumer of bills that honours the idempotency key; it can fail its first call."""

    __name__ = "ledger"

    def __init__(self, *, fail_first: bool = False) -> None:
        self.fail_first = fail_first
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.billed: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    @hookimpl
    def bill_run(self, run: Any, usage: dict[str, Any], idempotency_key: str) -> None:
        with self.lock:
            self.calls.append((run.run_id, idempotency_key, usage))
            if self.fail_first and len(self.calls) == 1:
                raise ConnectionError("the billing service is down")
            self.billed.setdefault(idempotency_key, usage)


def built_ins() -> list[object]:
    """The recovery plugins gateway_kit ships, fresh."""
    return [VisualFallback(), ToolHistoryRecovery(), TransientRetry()]
