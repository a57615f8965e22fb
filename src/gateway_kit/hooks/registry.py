"""`Registry`: pluggy's plugin manager, with every hook implementation guarded as it is
registered (by the policy declared with its hook's spec) and refused when it cannot be called
as gateway_kit calls hooks (async, or a wrapper)."""

from __future__ import annotations

import inspect
from typing import Any

import pluggy

from ..exceptions import PluginError
from .hung import HungCalls, counted
from .markers import PROJECT
from .policy import HookPolicy, guarded, policy_of

ASYNC_HOOK = "plugin {name!r}: {attr} is async; gateway_kit hooks are synchronous (return an "
ASYNC_HOOK += "object that does the async work instead)"
WRAPPER_HOOK = "plugin {name!r}: {attr} is a hook wrapper; gateway_kit hooks take no wrappers"
DUPLICATE = "cannot register plugin {name!r}: {error} (give the object a distinct __name__)"


def hook_policy(hook: pluggy.HookCaller) -> HookPolicy:
    """The policy declared with `hook`'s spec."""
    return policy_of(hook.spec.function if hook.spec is not None else None)


class Registry(pluggy.PluginManager):
    """:param timeout: seconds a `timed` hook's answer may take before it counts as a failure.
    :param hung: the calls hung per plugin, shared by every hook of the gateway.
    """

    def __init__(self, timeout: float, hung: HungCalls) -> None:
        super().__init__(PROJECT)
        self.timeout = timeout
        self.hung = hung

    def get_canonical_name(self, plugin: object) -> str:
        name = getattr(plugin, "__name__", None)
        if isinstance(name, str) and name:
            return name
        kind = type(plugin)
        return f"{kind.__module__}.{kind.__qualname__}"

    def register(self, plugin: object, name: str | None = None) -> str | None:
        try:
            registered = super().register(plugin, name)
        except ValueError as exc:
            raise PluginError(DUPLICATE.format(name=name or plugin, error=exc)) from exc
        if registered is None:
            return None  # blocked
        try:
            for caller in self.get_hookcallers(plugin) or ():
                for impl in caller.get_hookimpls():
                    if impl.plugin is plugin:
                        self._check(registered, impl)
                        self._guard(registered, caller, impl)
        except PluginError:
            self.unregister(plugin)
            raise
        return registered

    def _guard(self, plugin: str, hook: pluggy.HookCaller, impl: pluggy.HookImpl) -> None:
        policy = hook_policy(hook)
        function = guarded(impl.function, plugin, hook.name, policy, timeout=self.timeout)
        # pluggy types it Final; replacing it routes every call through the guard.
        impl.function = counted(  # type: ignore[misc]
            function, plugin, hook.name, policy, self.hung
        )

    @staticmethod
    def _check(name: str, impl: Any) -> None:
        attr = getattr(impl.function, "__name__", repr(impl.function))
        if impl.wrapper or impl.hookwrapper:
            raise PluginError(WRAPPER_HOOK.format(name=name, attr=attr))
        function = inspect.unwrap(impl.function)
        if inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function):
            raise PluginError(ASYNC_HOOK.format(name=name, attr=attr))
