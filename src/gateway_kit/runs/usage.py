"""What a run cost, from the usage goose reported in the run's events.

goose reports usage twice: `MessageUsage` once per provider call (its ``usage`` ledger entry),
and `Finish.token_state`, the session's counters at the end of a request. A run's usage sums the
provider calls of every attempt (follow-ups and recoveries included). An attempt whose calls were
not reported one by one counts its `Finish`'s ``inputTokens``/``outputTokens`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..log import Event
from .events import UPSTREAM_FINISH

MESSAGE_USAGE = "MessageUsage"
COUNTED = frozenset({MESSAGE_USAGE, UPSTREAM_FINISH})
TOKENS = {
    "inputTokens": "input_tokens",
    "outputTokens": "output_tokens",
    "totalTokens": "total_tokens",
    "cacheReadTokens": "cache_read_tokens",
    "cacheWriteTokens": "cache_write_tokens",
}


def _number(value: object) -> float | int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return value


def _add(totals: dict[str, Any], reported: Mapping[str, Any]) -> None:
    for goose_name, name in TOKENS.items():
        totals[name] += _number(reported.get(goose_name))
    if "totalTokens" not in reported:
        totals["total_tokens"] += _number(reported.get("inputTokens")) + _number(
            reported.get("outputTokens")
        )


def run_usage(events: Iterable[Event], attempts: int) -> dict[str, Any]:
    """The usage of a run whose events are `events`: token counts summed over its attempts,
    the cost where goose knew it, and the last token state goose reported."""
    totals: dict[str, Any] = dict.fromkeys(TOKENS.values(), 0)
    cost: float | None = None
    calls = 0
    reported_calls: set[str] = set()  # requests whose provider calls were reported
    finishes: list[tuple[str, Mapping[str, Any]]] = []
    token_state: Mapping[str, Any] | None = None
    for event in events:
        if event.type not in COUNTED:
            continue  # only these are decoded: a long run has thousands of other events
        data = event.data
        request = str(data.get("chat_request_id", ""))
        if event.type == MESSAGE_USAGE and isinstance(data.get("usage"), Mapping):
            usage = data["usage"]
            _add(totals, usage)
            if isinstance(usage.get("cost"), int | float):
                cost = (cost or 0.0) + float(usage["cost"])
            calls += 1
            reported_calls.add(request)
        elif event.type == UPSTREAM_FINISH and isinstance(data.get("token_state"), Mapping):
            token_state = data["token_state"]
            finishes.append((request, token_state))
    for request, state in finishes:
        if request not in reported_calls:
            _add(totals, {k: state.get(k) for k in ("inputTokens", "outputTokens")})
    return {
        **totals,
        "cost": cost,
        "provider_calls": calls,
        "attempts": attempts,
        "token_state": dict(token_state) if token_state is not None else None,
    }
