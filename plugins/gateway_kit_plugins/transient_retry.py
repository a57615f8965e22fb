"""Retry after a transient failure between the gateway and goose: a few times, with backoff.

When goosed cannot be reached, answers a 5xx, or does not answer in time, the run's request is
sent again in the same session, at most ``retries`` times per run, after a pause that doubles
from ``base_delay`` up to ``max_delay``; a ``Retry-After`` goose (or a proxy before it) sent is
honoured instead, and one longer than ``max_delay`` is not waited for (the run ends with its
`Error`). The wait holds nothing: a cancel meanwhile ends the run as cancelled.

Only the gateway's own failures toward goosed are classified (``UPSTREAM_TRANSIENT``), never
goose's ``Error`` events: goose retries its calls to the model provider itself, with backoff,
before it reports an error, so a provider's rate limit or 5xx is not retried a second time here.
Nor is the visual class (`visual_fallback`): a text-only model refuses the same history again.

A plugin rather than the lifecycle's own code: the lifecycle carries out any plan (its budget,
its wait without holding the run); which failures count as transient, how often and how long
to wait is policy, which a deployment tunes here, replaces with its own, or blocks by name.

Settings (``plugin_config={"transient_retry": {...}}``): ``enabled`` (default true),
``retries`` (2), ``base_delay`` (1 s), ``max_delay`` (30 s).
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from gateway_kit import RecoveryPlan, hookimpl
from gateway_kit.hooks import PluginContext

from .settings import check_known, count, flag, seconds
from .visual_fallback import is_visual_error

TRANSIENT_CLASS = "UPSTREAM_TRANSIENT"
KIND = "transient_retry"
# The gateway's own words for goosed failing (`gateway_kit.upstream`, `gateway_kit.runs`).
TRANSIENT_FAILURES = re.compile(
    r"cannot reach goose at|goose did not answer|goose answered 5\d\d\b"
    r"|the upstream stayed unreachable"
)
RETRY_AFTER = re.compile(r"\(retry after (\d+(?:\.\d+)?) s\)")
MAX_NOTED = 1000  # Retry-After values noted between the two hooks of one decision


class TransientRetry:
    def __init__(self) -> None:
        self.enabled = True
        self.retries = 2
        self.base_delay = 1.0
        self.max_delay = 30.0
        self._retry_after: OrderedDict[str, float] = OrderedDict()
        self._noted = threading.Lock()

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        check_known(config, {"enabled", "retries", "base_delay", "max_delay"})
        self.enabled = flag(config, "enabled", True)
        self.retries = count(config, "retries", 2, least=1)
        self.base_delay = seconds(config, "base_delay", 1.0)
        self.max_delay = seconds(config, "max_delay", 30.0)
        if self.base_delay > self.max_delay:
            raise ValueError(f"base_delay ({self.base_delay}) exceeds max_delay ({self.max_delay})")

    @hookimpl(trylast=True)
    def classify_error(self, error: str, run: Any) -> str | None:
        if not self.enabled or is_visual_error(error) or not TRANSIENT_FAILURES.search(error):
            return None
        asked = RETRY_AFTER.search(error)
        with self._noted:  # for plan_recovery, asked next about the same run
            self._retry_after.pop(run.run_id, None)
            if asked is not None:
                self._retry_after[run.run_id] = float(asked.group(1))
                while len(self._retry_after) > MAX_NOTED:
                    self._retry_after.popitem(last=False)
        return TRANSIENT_CLASS

    @hookimpl(trylast=True)
    def plan_recovery(
        self, error_class: str, run: Any, attempts: Sequence[Any]
    ) -> RecoveryPlan | None:
        if not self.enabled or error_class != TRANSIENT_CLASS:
            return None
        with self._noted:
            asked = self._retry_after.pop(run.run_id, None)
        tried = sum(1 for attempt in attempts if attempt.recovery == KIND)
        if asked is None:
            delay = min(self.max_delay, self.base_delay * 2**tried)
        elif asked > self.max_delay:
            return None  # goose asks for a longer wait than this run is given
        else:
            delay = asked
        return RecoveryPlan(KIND, retries=self.retries, delay=delay)
