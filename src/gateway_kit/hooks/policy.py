"""How a hook is called and what an implementation that fails counts as: its `HookPolicy`.

Each hook's policy is declared with its spec (`answers` in `gateway_kit.hooks.hookspecs`), and
nowhere else: the manager reads it there, and so does the test that holds docs/plugin_hooks.md
to it.

Every hook implementation runs inside `guarded`: an exception, an answer its hook cannot use, or
(for `timed` hooks) an answer slower than the plugin timeout is logged with the plugin's and the
hook's name and replaced by the hook's failure value. Four failure values are more than a
value: `REFUSED` (the request is refused, no other resolver asked), `RAISE` (the start-up
stops, naming the plugin), `RETRY` (the other plugins are still called, then the whole call
raises `HookFailed`, to be made again later) and a `FailedAs` (a value made for each failure,
naming the plugin and how it failed: a finish guard's `GuardFailure`). A hook that
`unavailable_raises` lets `DatabaseUnavailable` through: that is no verdict on the request,
which is answered 503 (try again), not refused; so is `PluginUnavailable`, raised for such a
hook when the gateway cannot ask a plugin at all (no thread free in time, or the plugin has too
many calls hung).
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..exceptions import DatabaseUnavailable, PluginError

logger = logging.getLogger(__name__)

RAISED = "plugin %r raised in hook %s; counted as %r"
NONSENSE = "plugin %r answered %r to hook %s, which expects %s; counted as %r"
TOO_SLOW = "plugin %r took %.3g s to answer hook %s, over the plugin timeout of %g s; counted as %r"
UNAVAILABLE = "plugin %r could not reach the database in hook %s; the request is answered 503"
CONFIG_FAILED = "plugin {name!r} refused its settings: {error}"
# How a plugin failed, as a `FailedAs` value is told.
RAISED_HOW = "raised {kind}"
NONSENSE_HOW = "answered {answer!r:.80} where {expects} was expected"
TOO_SLOW_HOW = "did not answer within {timeout:g} s"
HUNG_HOW = "has too many calls hung to be asked"


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

# The threads a hook's calls run in: each kind has its own, so that a hook stuck in one kind
# never holds up the others (a hanging guard never stops bills, a hanging authorization never
# stops identity).
HOOK_POOL = "hook"
IDENTITY_POOL = "identity"
AUTHORIZATION_POOL = "authorization"
LIFECYCLE_POOL = "lifecycle"
BILLING_POOL = "billing"
HEARTBEAT_POOL = "heartbeat"

POLICY_ATTRIBUTE = "gateway_kit_policy"


@dataclass(frozen=True, slots=True)
class FailedAs:
    """A failure value made for each failure: ``make(plugin, how)``, where `how` says how the
    plugin failed ("raised OSError", ...). Named `described` in the log and the docs."""

    make: Callable[[str, str], object]
    described: str

    def __repr__(self) -> str:
        return self.described


@dataclass(frozen=True, slots=True)
class HookPolicy:
    """How a hook is called, and what an implementation that fails counts as answering."""

    accepts: Callable[[object], bool]
    expects: str  # for the log, when an answer is not accepted
    on_failure: object = None
    timed: bool = False  # an answer slower than the plugin timeout counts as a failure
    # `DatabaseUnavailable` reaches the caller rather than counting as a failure.
    unavailable_raises: bool = False
    pool: str = HOOK_POOL  # the threads its calls run in

    def failure(self, plugin: str, how: str) -> object:
        """What `plugin`'s implementation, failing as `how` says, counts as answering."""
        on_failure = self.on_failure
        return on_failure.make(plugin, how) if isinstance(on_failure, FailedAs) else on_failure


def anything(value: object) -> bool:
    return True


def optional(*types: type) -> Callable[[object], bool]:
    """None, or a value of one of `types` (not an empty string)."""
    return lambda value: value is None or (isinstance(value, types) and value != "")


def one_of(*choices: object) -> Callable[[object], bool]:
    return lambda value: value in choices


DEFAULT_POLICY = HookPolicy(anything, "anything")

F = TypeVar("F", bound=Callable[..., Any])


def answers(
    accepts: Callable[[object], bool],
    expects: str,
    *,
    on_failure: object = None,
    timed: bool = False,
    unavailable_raises: bool = False,
    pool: str = HOOK_POOL,
) -> Callable[[F], F]:
    """Declare, beside a hook's spec, the answers it accepts and what a failure counts as."""
    declared = HookPolicy(accepts, expects, on_failure, timed, unavailable_raises, pool)

    def declare(spec: F) -> F:
        setattr(spec, POLICY_ATTRIBUTE, declared)
        return spec

    return declare


def policy_of(spec: Callable[..., Any] | None) -> HookPolicy:
    """The policy declared with the hook spec `spec` (`DEFAULT_POLICY` when none is)."""
    declared = getattr(spec, POLICY_ATTRIBUTE, DEFAULT_POLICY)
    assert isinstance(declared, HookPolicy)
    return declared


@dataclass(slots=True)
class CallProgress:
    """Which plugin a hook call running in another thread is in, for the log of a timeout."""

    plugin: str | None = None
    failed: list[str] = field(default_factory=list)  # plugins whose call is to be made again
    running: bool = False  # inside `plugin`'s implementation
    overdue: bool = False  # past its timeout: its caller no longer waits for the answer
    charged: str | None = None  # the plugin this call counts as hung in
    stuck_in: str | None = None  # the plugin it was inside when its time ran out, if any


CURRENT_CALL: contextvars.ContextVar[CallProgress | None] = contextvars.ContextVar(
    "gateway_kit_current_call", default=None
)


def guarded(
    function: Callable[..., Any], plugin: str, hook: str, policy: HookPolicy, *, timeout: float
) -> Callable[..., Any]:
    """`function`, an implementation of `hook` by `plugin`, made to fail as `policy` says."""
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
            return policy.failure(plugin, RAISED_HOW.format(kind=type(exc).__name__))
        if answer is not None and not accepts(answer):  # None is every hook's "no answer"
            logger.error(NONSENSE, plugin, answer, hook, policy.expects, on_failure)
            how = NONSENSE_HOW.format(answer=answer, expects=policy.expects)
            return policy.failure(plugin, how)
        if timed and (elapsed := clock() - started) > timeout:
            logger.error(TOO_SLOW, plugin, elapsed, hook, timeout, on_failure)
            return policy.failure(plugin, TOO_SLOW_HOW.format(timeout=timeout))
        return answer

    call.__wrapped__ = function  # type: ignore[attr-defined]
    return call
