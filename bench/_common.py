"""What the benchmark scripts share: the events they append, medians, the results table."""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gateway_kit import hookimpl

PASS = "PASS"
MISS = "MISS"
INFO = "info"

STREAM = "conv-1"
TYPE = "Message"
RUN_ID = "run-1"
TEXT = "The quick brown fox jumps over the lazy dog. " * 3  # a short chat message, ~135 bytes

# What a raw client stores: the same compact JSON text gateway_kit stores.
encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def payload(i: int) -> dict[str, Any]:
    """The data of the i-th event: about 170 bytes of JSON, like a short chat message."""
    return {"text": TEXT, "i": i, "role": "assistant"}


@dataclass
class Case:
    """One comparison: gateway_kit's rate against a baseline's rate, measured round by round."""

    name: str
    goal: float | None  # the lowest acceptable ratio; None for a case shown for information only
    ours: list[float] = field(default_factory=list)  # events/s, one per round
    theirs: list[float] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, ours: float, theirs: float) -> None:
        self.ours.append(ours)
        self.theirs.append(theirs)

    @property
    def ratios(self) -> list[float]:
        return [o / t for o, t in zip(self.ours, self.theirs, strict=True)]

    @property
    def ratio(self) -> float:
        # The median of per-round ratios: both sides of a round share the machine's mood.
        return statistics.median(self.ratios)

    @property
    def verdict(self) -> str:
        if self.goal is None:
            return INFO
        return PASS if self.ratio >= self.goal else MISS


def rate(events: int, seconds: float) -> float:
    return events / seconds if seconds > 0 else float("inf")


def print_table(
    title: str,
    cases: Sequence[Case],
    ours: str,
    theirs: str,
    *,
    unit: str = "",
    percent: bool = False,
) -> None:
    """Medians of both sides (in `unit`), the median per-round ratio, the goal;
    ratios and goals as percentages (`percent`) or as plain factors."""

    def ratio_text(value: float) -> str:
        return f"{value:.1%}" if percent else f"{value:.2f}"

    header = (
        f"{'case':<48} {ours:>14} {theirs:>14} {'ratio':>8} {'min-max':>13} {'goal':>7}  result"
    )
    print(f"\n{title}  ({unit})" if unit else f"\n{title}")
    print(header)
    print("-" * len(header))
    for case in cases:
        spread = f"{min(case.ratios):.2f}-{max(case.ratios):.2f}"
        goal = "-" if case.goal is None else f">={ratio_text(case.goal)}"
        print(
            f"{case.name:<48} {statistics.median(case.ours):>14,.1f} "
            f"{statistics.median(case.theirs):>14,.1f} {ratio_text(case.ratio):>8} "
            f"{spread:>13} {goal:>7}  {case.verdict}"
        )
        for note in case.notes:
            print(f"{'':<4}{note}")


class NoopGuard:
    """A finish guard that lets every run end (a plugin named ``guard-<number>``)."""

    def __init__(self, number: int) -> None:
        self.__name__ = f"guard-{number}"

    @hookimpl
    def finish_guard(self, run: Any, events: Any) -> None:
        return None
