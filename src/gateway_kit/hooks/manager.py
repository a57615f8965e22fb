"""`Plugins`: the plugin manager of one gateway, and the calls of the hooks the gateway makes.

One `pluggy.PluginManager` per `Gateway` (never a global), project name and entry-point group
``gateway_kit``. Plugins come from this distribution's built-in entry points (always), other
installed distributions' entry points (unless switched off) and ``plugins=`` (passed in), in
that order; pluggy calls the latest registered first, and the built-ins are ``trylast``, so a
deployment's plugins are asked before them. Any plugin can be blocked by name.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pluggy

from ..exceptions import PluginError, PluginUnavailable
from ..http.errors import FORBIDDEN, HTTPError
from ..principal import Principal
from ..settings import DEFAULT_PLUGIN_HUNG_LIMIT, DEFAULT_PLUGIN_TIMEOUT
from ..types import Scope
from . import hookspecs
from .context import PluginContext
from .hung import HungCalls
from .loading import BUILT_IN, PASSED_IN, PluginSource, entry_points, load
from .policy import (
    AUTHORIZATION_POOL,
    BILLING_POOL,
    CURRENT_CALL,
    IDENTITY_POOL,
    LIFECYCLE_POOL,
    REFUSED,
    TOO_SLOW_HOW,
    CallProgress,
    HookFailed,
    Refused,
)
from .registry import Registry, hook_policy
from .results import GuardFailure, GuardVeto, RecoveryPlan
from .threads import HookThreads, NotStarted

if TYPE_CHECKING:
    from ..log.event import Event

logger = logging.getLogger(__name__)

# Threads for hooks that may block, counting only calls within their time (a hung call's
# thread is replaced): a plugin stuck in one never holds up the log's readers.
HOOK_THREADS = 8
# Threads for `resolve_principal` alone (every request waits on it), and for
# `authorize_subscription` alone: a hung authorization never keeps a request from its principal.
IDENTITY_THREADS = 8
AUTHORIZATION_THREADS = 8
# Threads for the hooks of runs' lives (guards, recoveries): enough for many runs at once.
LIFECYCLE_THREADS = 32
# Threads for `bill_run` alone: bills are delivered whatever the guards do.
BILLING_THREADS = 4
# The pools whose calls are timed from when a thread starts them, not from when they are
# queued: no client waits on them, and a guard or a bill asked late beats one never asked.
UNHURRIED_POOLS = frozenset({LIFECYCLE_POOL, BILLING_POOL})

UNKNOWN_HOOK = "plugin {name!r} implements a hook gateway_kit does not have: {error}"
UNKNOWN_CONFIG = "plugin_config names {names}, which {verb} no loaded plugin; loaded: {loaded}"
BAD_CONFIG = "plugin_config[{name!r}] must be a mapping of settings, got {value!r}"
UNANSWERED = "plugin %r did not answer authorize_subscription within %g s; the read is refused"
UNRESOLVED = "plugin %r did not answer resolve_principal within %g s; the request is refused"
SLOW_HOOK = "plugin %r did not answer %s within %g s; going on without its answer"
NO_THREAD = "no thread was free to ask %s within %g s; going on without an answer"
UNASKED = "{hook} could not be asked of the plugins within {timeout:g} s (no thread was free in "
UNASKED += "time); answered 503, try again shortly"
NOBODY_DECIDED = "no plugin decided whether %r may read stream %r; refused"
NOT_YOURS = "you may not read stream {stream!r}"


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One loaded plugin, as ``gateway-kit plugins`` lists it."""

    name: str
    source: PluginSource
    hooks: tuple[str, ...]


class Plugins:
    """The plugins of one gateway.

    :param plugins: plugin modules or objects to register (an object's name is its
        ``__name__``, else its class's qualified name).
    :param config: settings per plugin name, handed to each plugin's `configure_plugin`.
    :param load_entry_points: also load other installed distributions' plugins.
    :param block: names of plugins not to register (built-ins included).
    :param timeout: seconds an access decision (`resolve_principal`, `authorize_subscription`)
        may take, from when it is asked for: a plugin still working on it then counts as
        refusing; one that no thread could ask by then is `PluginUnavailable` (a 503).
    :param hung_limit: calls one plugin may have hung (past their timeout, still running in
        their threads) before it is no longer asked, its hooks failing at once.
    :param context: what each plugin's `configure_plugin` gets beside its settings.
    """

    def __init__(
        self,
        plugins: Sequence[object] = (),
        *,
        config: Mapping[str, Mapping[str, Any]] | None = None,
        load_entry_points: bool = True,
        block: Iterable[str] = (),
        timeout: float = DEFAULT_PLUGIN_TIMEOUT,
        context: PluginContext | None = None,
        hung_limit: int = DEFAULT_PLUGIN_HUNG_LIMIT,
    ) -> None:
        self.timeout = timeout
        self.context = context if context is not None else PluginContext()
        self.hung = HungCalls(hung_limit)
        self.manager = Registry(timeout, self.hung)
        self.manager.add_hookspecs(hookspecs)
        self.blocked = frozenset(block)
        for name in self.blocked:
            self.manager.set_blocked(name)
        self.sources: dict[str, PluginSource] = {}
        for entry, source in entry_points():
            if not load_entry_points and source.kind != BUILT_IN:
                continue
            if entry.name not in self.blocked and self.manager.get_plugin(entry.name) is None:
                self._register(load(entry, source), entry.name, source)
        for plugin in plugins:
            self._register(plugin, None, PluginSource(PASSED_IN))
        self._check_pending()
        self._configure(config or {})
        self._pools: dict[str, HookThreads] = {}
        # Asked for every request: with no resolver registered, not even pluggy is called.
        self._resolvers = bool(self.manager.hook.resolve_principal.get_hookimpls())
        self._tmux_resolvers = bool(self.manager.hook.resolve_tmux_session.get_hookimpls())

    @property
    def hook(self) -> pluggy.HookRelay:
        """pluggy's hook relay, to call a hook in this thread:
        ``plugins.hook.finish_guard(run=..., events=...)``."""
        return self.manager.hook

    def _register(self, plugin: object, name: str | None, source: PluginSource) -> None:
        registered = self.manager.register(plugin, name)
        if registered is not None:
            self.sources[registered] = source

    def _check_pending(self) -> None:
        """A hook implementation no spec names is a typo; say so at start-up."""
        try:
            self.manager.check_pending()
        except pluggy.PluginValidationError as exc:
            name = self.manager.get_name(exc.plugin) or exc.plugin
            raise PluginError(UNKNOWN_HOOK.format(name=name, error=exc)) from exc

    def _configure(self, config: Mapping[str, Mapping[str, Any]]) -> None:
        unknown = sorted(set(config) - set(self.sources) - self.blocked)
        if unknown:
            raise PluginError(
                UNKNOWN_CONFIG.format(
                    names=", ".join(map(repr, unknown)),
                    verb="is" if len(unknown) == 1 else "are",
                    loaded=", ".join(sorted(self.sources)) or "none",
                )
            )
        for name, settings in config.items():
            if not isinstance(settings, Mapping):
                raise PluginError(BAD_CONFIG.format(name=name, value=settings))
        for impl in self.manager.hook.configure_plugin.get_hookimpls():
            arguments = {"config": config.get(impl.plugin_name, {}), "context": self.context}
            impl.function(*(arguments[name] for name in impl.argnames))

    def describe(self) -> list[PluginInfo]:
        """The loaded plugins, in the order they were registered."""
        return [
            PluginInfo(
                name=name,
                source=self.sources[name],
                hooks=tuple(sorted(c.name for c in self.manager.get_hookcallers(plugin) or ())),
            )
            for name, plugin in self.manager.list_name_plugin()
            if name in self.sources
        ]

    # --- the access decisions ----------------------------------------------------------------

    async def resolve_principal(self, scope: Scope) -> Principal | Refused | None:
        """Who `scope` is from: a `Principal`, `REFUSED` (a resolver failed or did not answer
        within the timeout), or None; asked off the event loop, so a slow resolver delays only
        its own request. `PluginUnavailable` when a resolver could not be asked (no thread
        free within the timeout, or it has too many calls hung): no verdict, a 503."""
        if not self._resolvers:
            return None
        progress = CallProgress()
        hook = self.manager.hook.resolve_principal
        try:
            answer: Principal | Refused | None = await self._run(
                hook, progress, lambda: hook(scope=scope), self.timeout
            )
        except TimeoutError:
            if progress.stuck_in is None:
                raise self._unasked(hook) from None
            logger.error(UNRESOLVED, progress.stuck_in, self.timeout)
            return REFUSED
        return answer

    async def authorize_subscription(
        self, principal: Principal, stream: str, action: str = hookspecs.READ
    ) -> bool:
        """Whether `principal` may do `action` (`hookspecs.READ`, `hookspecs.CLAIM`) with
        `stream`; asked off the event loop, within the timeout. `PluginUnavailable` as for
        `resolve_principal`: the gateway could not ask."""
        progress = CallProgress()
        hook = self.manager.hook.authorize_subscription

        def ask() -> Any:
            return hook(principal=principal, stream=stream, action=action)

        try:
            answer = await self._run(hook, progress, ask, self.timeout)
        except TimeoutError:
            if progress.stuck_in is None:
                raise self._unasked(hook) from None
            logger.error(UNANSWERED, progress.stuck_in, self.timeout)
            return False
        if answer is None:
            # Every plugin deferred: the stream's owner only, and no owner is recorded.
            logger.warning(NOBODY_DECIDED, principal.user_id, stream)
            return False
        return answer is True

    async def require_read(
        self, principal: Principal, stream: str, action: str = hookspecs.READ
    ) -> None:
        """A 403 `forbidden` unless `principal` may read `stream` (every route asks this), or
        do `action` with it."""
        if not await self.authorize_subscription(principal, stream, action):
            raise HTTPError(403, FORBIDDEN, NOT_YOURS.format(stream=stream))

    def _unasked(self, hook: pluggy.HookCaller) -> PluginUnavailable:
        """The timeout ended while the call was inside no plugin (no thread had started it, or
        it was on its way to the next plugin): the gateway could not ask in time, which is no
        refusal; a call timed out inside a plugin is that plugin's refusal."""
        message = UNASKED.format(hook=hook.name, timeout=self.timeout)
        logger.error("%s", message)
        return PluginUnavailable(message)

    # --- the heartbeat hooks -------------------------------------------------------------------

    def resolve_tmux_session(self, scope: Scope) -> str | None:
        """The tmux session an observed request belongs to, or None; asked in the calling
        thread (the event loop: the hook answers from the scope and from memory)."""
        if not self._tmux_resolvers:
            return None
        answer: str | None = self.hook.resolve_tmux_session(scope=scope)
        return answer

    async def heartbeat_policy(self, state: Any, now: float, *, timeout: float) -> str | None:
        """A policy plugin's decision, or None (also when none answered within `timeout`)."""
        answer: str | None = await self._within(
            self.hook.heartbeat_policy, timeout, state=state, now=now
        )
        return answer

    async def heartbeat_fallback(self, tmux_session_id: str, *, timeout: float) -> str | None:
        """A fallback plugin's word on the session's pane, or None when none answered;
        ``"skip"`` when they did not answer within `timeout` (nobody vouched for the pane)."""
        hook = self.hook.heartbeat_fallback
        if not hook.get_hookimpls():
            return None
        try:
            answer: str | None = await self._in_thread(
                hook, timeout, tmux_session_id=tmux_session_id
            )
        except TimeoutError:
            return "skip"
        return answer

    # --- the hooks of runs' lives and of billing, each kind in threads of its own -----------

    async def finish_guard(
        self, run: Any, events: Sequence[Event], *, timeout: float
    ) -> list[GuardVeto]:
        """Every guard's veto of `run`'s ``Finish`` (none when no guard is registered). Guards
        that did not answer within `timeout` checked nothing: a `GuardFailure` naming the
        guard they were in, never a pass."""
        hook = self.hook.finish_guard
        if not hook.get_hookimpls():
            return []
        progress = CallProgress()
        try:
            answers = await self._run(hook, progress, lambda: hook(run=run, events=events), timeout)
        except TimeoutError:
            if progress.plugin is None:
                logger.error(NO_THREAD, hook.name, timeout)
            else:
                logger.error(SLOW_HOOK, progress.plugin, hook.name, timeout)
            return [GuardFailure.of(progress.plugin, TOO_SLOW_HOW.format(timeout=timeout))]
        return [answer for answer in answers if isinstance(answer, GuardVeto)]

    async def classify_error(self, error: str, run: Any, *, timeout: float) -> str | None:
        """The class of `error`, or None (also when no plugin answered within `timeout`)."""
        answer: str | None = await self._within(
            self.hook.classify_error, timeout, error=error, run=run
        )
        return answer

    async def plan_recovery(
        self, error_class: str, run: Any, attempts: Sequence[Any], *, timeout: float
    ) -> RecoveryPlan | None:
        """How `run` recovers from `error_class`, or None (also when no plugin answered within
        `timeout`)."""
        hook = self.hook.plan_recovery
        arguments = {"error_class": error_class, "run": run, "attempts": attempts}
        plan: RecoveryPlan | None = await self._within(hook, timeout, **arguments)
        return plan

    async def bill_run(
        self, run: Any, usage: Mapping[str, Any], idempotency_key: str, *, timeout: float
    ) -> None:
        """Deliver `run`'s bill. `TimeoutError` once the call has run `timeout` seconds (it goes
        on in its thread, and its answer is dropped); `HookFailed` when an implementation raised
        or was not asked (its plugin has too many calls hung): deliver it again later."""
        hook = self.hook.bill_run
        arguments = {"run": run, "usage": usage, "idempotency_key": idempotency_key}
        await self._in_thread(hook, timeout, **arguments)

    async def _within(self, hook: pluggy.HookCaller, timeout: float, **arguments: Any) -> Any:
        """`hook`'s answer, or None when nothing implements it or it took more than `timeout`."""
        if not hook.get_hookimpls():
            return None
        try:
            return await self._in_thread(hook, timeout, **arguments)
        except TimeoutError:
            return None

    async def _in_thread(self, hook: pluggy.HookCaller, timeout: float, **arguments: Any) -> Any:
        """`hook` called with `arguments` in its threads, within `timeout` (counted from when
        it is queued, or for `UNHURRIED_POOLS` from when it starts; a call past it no longer
        holds a place in them, `gateway_kit.hooks.threads`)."""
        progress = CallProgress()
        try:
            answer = await self._run(hook, progress, lambda: hook(**arguments), timeout)
        except NotStarted:
            logger.error(NO_THREAD, hook.name, timeout)
            raise
        except TimeoutError:
            logger.error(SLOW_HOOK, progress.plugin, hook.name, timeout)
            raise
        if progress.failed:
            raise HookFailed(progress.failed, hook.name)
        return answer

    async def _run(
        self,
        hook: pluggy.HookCaller,
        progress: CallProgress,
        call: Callable[[], Any],
        timeout: float,
    ) -> Any:
        """`call()` in the threads of `hook`, with `progress` as the call's `CURRENT_CALL`."""

        def in_thread() -> Any:
            CURRENT_CALL.set(progress)  # this thread's copy of the caller's context
            return call()

        context = contextvars.copy_context()
        return await self._threads(hook_policy(hook).pool).run(
            lambda: context.run(in_thread), timeout, lambda: self.hung.abandon(progress)
        )

    def _threads(self, pool: str) -> HookThreads:
        threads = self._pools.get(pool)
        if threads is None:
            # Read now, not at import: a test may give a kind fewer threads.
            sizes = {
                IDENTITY_POOL: IDENTITY_THREADS,
                AUTHORIZATION_POOL: AUTHORIZATION_THREADS,
                BILLING_POOL: BILLING_THREADS,
                LIFECYCLE_POOL: LIFECYCLE_THREADS,
            }
            size = sizes.get(pool, HOOK_THREADS)
            threads = self._pools[pool] = HookThreads(
                size, f"gateway-kit-{pool}", count_queued=pool not in UNHURRIED_POOLS
            )
        return threads
