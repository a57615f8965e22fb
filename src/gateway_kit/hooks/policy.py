"""What each hook's answer may be, and what an implementation that fails counts as.

Every hook implementation runs inside `guarded`: an exception, an answer its hook cannot use, or
(for the hooks that decide who gets in) an answer slower than the plugin timeout is logged with
the plugin's and the hook's name and replaced by the hook's failure value. Decisions about
access fail closed: a failed `resolve_principal` is `REFUSED` (a 401), a failed
`authorize_subscription` is ``False`` (a 403). Except when an access hook failed because the
database cannot be reached (`DatabaseUnavailable`): that is no verdict on the request, which is
answered 503 (try again), not 401 or 403. A failed `configure_plugin` stops the start-up,
and a failed `bill_run` makes `Plugins.call_in_thread` raise `HookFailed` once the other
plugins were called: the bill's delivery is made again later, with the same key.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import DatabaseUnavailable, PluginError
from ..identity.principal import Principal
from .results import GuardVeto, RecoveryPlan

logger = logging.getLogger("gateway_kit.plugins")

RAISED = "plugin %r raised in hook %s; counted as %r"
NONSENSE = "plugin %r answered %r to hook %s, which expects %s; counted as %r"
TOO_SLOW = "plugin %r took %.3g s to answer hook %s, over the plugin timeout of %g s; counted as %r"
UNAVAILABLE = "plugin %r could not reach the database in hook %s; the request is answered 503"
CONFIG_FAILED = "plugin {name!r} refused its settings: {error}"


class HookFailed(Exception):
    """Implementations of a hook whose call is made again later raised."""

    def __init__(self, plugins: list[str], hook: str) -> None:
        super().__init__(f"{', '.join(map(repr, plugins))} raised in hook {hook}")
        self.plugins = plugins
        self.hook = hook


class Refused:
    """The answer of a failed identity plugin: the request is refused, no other resolver asked."""

    def __repr__(self) -> str:
        return "REFUSED"


REFUSED = Refused()
RAISE = object()  # the failure "value" of hooks whose failure must stop the start-up
RETRY = object()  # the failure "value" of hooks whose call is made again later
CLOCK = time.monotonic  # what times the access hooks; read when an implementation is guarded


@dataclass(frozen=True, slots=True)
class HookPolicy:
    accepts: Callable[[object], bool]
    expects: str  # for the log, when an answer is not accepted
    on_failure: object = None
    timed: bool = False  # an answer slower than the plugin timeout counts as a failure
    # `DatabaseUnavailable` reaches the caller rather than counting as a failure.
    unavailable_raises: bool = False


def _anything(value: object) -> bool:
    return True


def _optional(*types: type) -> Callable[[object], bool]:
    return lambda value: value is None or (isinstance(value, types) and value != "")


def _identified(value: object) -> bool:
    # The anonymous principal is the gateway's own answer (only with allow_anonymous, which
    # lets it read everything): a resolver answering with it is refused, not believed.
    return value is None or (isinstance(value, Principal) and not value.anonymous)


def _one_of(*choices: object) -> Callable[[object], bool]:
    return lambda value: value in choices


POLICIES: dict[str, HookPolicy] = {
    "finish_guard": HookPolicy(_optional(GuardVeto), "None or a GuardVeto"),
    "bill_run": HookPolicy(_anything, "anything", on_failure=RETRY),
    "classify_error": HookPolicy(_optional(str), "None or an error class name"),
    "plan_recovery": HookPolicy(_optional(RecoveryPlan), "None or a RecoveryPlan"),
    "resolve_tmux_session": HookPolicy(_optional(str), "None or a tmux session id"),
    "heartbeat_policy": HookPolicy(_one_of(None, "allow", "skip"), "None, 'allow' or 'skip'"),
    "heartbeat_fallback": HookPolicy(_one_of(None, "allow", "skip"), "None, 'allow' or 'skip'"),
    "resolve_principal": HookPolicy(
        _identified,
        "None or a Principal not of the anonymous method",
        on_failure=REFUSED,
        timed=True,
        unavailable_raises=True,
    ),
    "authorize_subscription": HookPolicy(
        lambda value: value is None or isinstance(value, bool),
        "True, False or None",
        on_failure=False,
        timed=True,
        unavailable_raises=True,
    ),
    "configure_plugin": HookPolicy(_anything, "anything", on_failure=RAISE),
    "cookie_logins": HookPolicy(
        lambda value: isinstance(value, tuple) and len(value) == 2, "None or (reader, ended)"
    ),
}


@dataclass(slots=True)
class CallProgress:
    """Which plugin a hook call running in another thread is in, for the log of a timeout."""

    plugin: str | None = None
    failed: list[str] = field(default_factory=list)  # plugins whose call is to be made again
    running: bool = False  # inside `plugin`'s implementation
    overdue: bool = False  # past its timeout: its caller no longer waits for the answer
    charged: str | None = None  # the plugin this call counts as hung in


CURRENT_CALL: contextvars.ContextVar[CallProgress | None] = contextvars.ContextVar(
    "gateway_kit_current_call", default=None
)


def guarded(
    function: Callable[..., Any], plugin: str, hook: str, *, timeout: float
) -> Callable[..., Any]:
    """`function`, an implementation of `hook` by `plugin`, made to fail as its policy says."""
    policy = POLICIES.get(hook, HookPolicy(_anything, "anything"))
    # Bound once: the identity hooks run for every request the gateway serves or passes on.
    accepts, on_failure, timed, clock = (
        policy.accepts,
        policy.on_failure,
        policy.timed,
        CLOCK,
    )
    passes_on: tuple[type[BaseException], ...] = (
        (DatabaseUnavailable,) if policy.unavailable_raises else ()
    )

    def call(*args: Any) -> Any:
        progress = CURRENT_CALL.get()
        if progress is not None:
            progress.plugin = plugin
        started = clock() if timed else 0.0
        try:
            answer = function(*args)
        except passes_on:
            logger.warning(UNAVAILABLE, plugin, hook)
            raise
        except Exception as exc:
            if on_failure is RAISE:
                raise PluginError(CONFIG_FAILED.format(name=plugin, error=exc)) from exc
            if on_failure is RETRY:
                # The other plugins are still called; whoever made the call learns of the
                # failure from its progress, and makes the whole call again later.
                logger.exception(RAISED, plugin, hook, "a failed call, made again later")
                if progress is not None:
                    progress.failed.append(plugin)
                return None
            logger.exception(RAISED, plugin, hook, on_failure)
            return on_failure
        if answer is not None and not accepts(answer):  # None is every hook's "no answer"
            logger.error(NONSENSE, plugin, answer, hook, policy.expects, on_failure)
            return on_failure
        if timed and (elapsed := clock() - started) > timeout:
            logger.error(TOO_SLOW, plugin, elapsed, hook, timeout, on_failure)
            return on_failure
        return answer

    call.__wrapped__ = function  # type: ignore[attr-defined]
    return call
