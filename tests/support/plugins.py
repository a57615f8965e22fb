"""Small plugins for the hook tests, made as namespaces with a name of their own."""

from __future__ import annotations

import types
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from gateway_kit import hookimpl


def plugin(name: str, **hooks: Callable[..., Any]) -> SimpleNamespace:
    """A plugin called `name` implementing `hooks` (functions, or (function, options) pairs)."""
    marked: dict[str, Any] = {}
    for hook, impl in hooks.items():
        function, options = impl if isinstance(impl, tuple) else (impl, {})
        marked[hook] = hookimpl(**options)(_copy(function))
    return SimpleNamespace(__name__=name, **marked)


def _copy(function: Callable[..., Any]) -> Callable[..., Any]:
    """A fresh function object: the marker is an attribute, and plugins may share a body."""
    code = function.__code__  # type: ignore[attr-defined]
    return types.FunctionType(code, function.__globals__, code.co_name, None, function.__closure__)  # type: ignore[attr-defined]


def raising(*args: Any) -> Any:
    raise RuntimeError("this plugin is broken")
