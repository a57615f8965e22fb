"""Hung calls, counted per plugin: a plugin with `limit` of them is not asked again until one ends.

A call past its timeout goes on in its thread (Python cannot stop a thread), and that thread is
replaced (`gateway_kit.hooks.threads`): what bounds the threads a plugin that never returns can
take is this count. Once a plugin has `limit` calls hung, its implementations answer their
hook's failure value (declared with its spec) at once, logged with its name, while the other
plugins go on being asked; except for the hooks a request waits on (those that
`unavailable_raises`: `resolve_principal`, `authorize_subscription`), where a plugin that
cannot be asked is no verdict: `PluginUnavailable`, a 503 to try again, never a refusal. A call
past its timeout asks no further plugin: nobody waits for its answer.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..exceptions import PluginUnavailable
from .policy import CURRENT_CALL, HUNG_HOW, RETRY, CallProgress, HookPolicy

logger = logging.getLogger(__name__)

DEFAULT_LIMIT = 32
TOO_MANY_HUNG = (
    "plugin %r has %d calls hung (the limit); %s counted as %r without asking it until one ends"
)
UNASKED = (
    "plugin %r has %d calls hung (the limit); %s answered 503 without asking it until one ends"
)
NOT_ASKED = "plugin {plugin!r} has {count} calls hung; it is not asked until one of them ends"


class HungCalls:
    """How many calls each plugin has hung; `limit` per plugin."""

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, plugin: str) -> int:
        return self._counts.get(plugin, 0)

    def full(self, plugin: str) -> bool:
        return self._counts.get(plugin, 0) >= self.limit

    def abandon(self, progress: CallProgress) -> None:
        """The call of `progress` is past its timeout: the plugin it is in counts it as hung."""
        with self._lock:
            progress.overdue = True
            if progress.running and progress.plugin is not None:
                progress.charged = progress.stuck_in = progress.plugin
                self._counts[progress.plugin] = self._counts.get(progress.plugin, 0) + 1

    def enter(self, progress: CallProgress, plugin: str) -> bool:
        """Whether the call of `progress` is to go into `plugin` (False once it is overdue)."""
        with self._lock:
            if progress.overdue:
                return False
            progress.plugin = plugin
            progress.running = True
            return True

    def leave(self, progress: CallProgress) -> None:
        with self._lock:
            progress.running = False
            charged = progress.charged
            if charged is not None:
                progress.charged = None
                left = self._counts[charged] - 1
                if left:
                    self._counts[charged] = left
                else:
                    del self._counts[charged]


def counted(
    function: Callable[..., Any], plugin: str, hook: str, policy: HookPolicy, hung: HungCalls
) -> Callable[..., Any]:
    """`function` (a `guarded` implementation of `hook` by `plugin`) not called while `plugin`
    has too many calls hung, nor once the call it is part of is past its timeout; then it
    answers `policy`'s failure value, or raises `PluginUnavailable` for a hook that
    `unavailable_raises`."""

    def call(*args: Any) -> Any:
        progress = CURRENT_CALL.get()
        if hung.full(plugin):
            return _failed(policy, plugin, hook, hung, progress)
        if progress is None:
            return function(*args)
        if not hung.enter(progress, plugin):
            return None  # its caller has gone on without the answer
        try:
            return function(*args)
        finally:
            hung.leave(progress)

    call.__wrapped__ = function  # type: ignore[attr-defined]
    return call


def _failed(policy: HookPolicy, plugin: str, hook: str, hung: HungCalls, progress: Any) -> Any:
    on_failure = policy.on_failure
    if policy.unavailable_raises:
        logger.error(UNASKED, plugin, hung.count(plugin), hook)
        raise PluginUnavailable(NOT_ASKED.format(plugin=plugin, count=hung.count(plugin)))
    if on_failure is RETRY:
        logger.error(TOO_MANY_HUNG, plugin, hung.count(plugin), hook, "a call made again later")
        if progress is not None:
            progress.failed.append(plugin)
        return None
    logger.error(TOO_MANY_HUNG, plugin, hung.count(plugin), hook, on_failure)
    return policy.failure(plugin, HUNG_HOW)
