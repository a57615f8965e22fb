"""`Middleware`: a part of a stack, not yet built around the app below it (as Starlette's)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from ..types import ASGIApp

BAD_MIDDLEWARE = "a middleware is Middleware(cls, *args, **kwargs) or (cls, args, kwargs), got {!r}"


class Middleware:
    def __init__(self, cls: Callable[..., ASGIApp], *args: Any, **kwargs: Any) -> None:
        self.cls = cls
        self.args = args
        self.kwargs = kwargs

    def __iter__(self) -> Any:
        return iter((self.cls, self.args, self.kwargs))

    def build(self, app: ASGIApp) -> ASGIApp:
        return self.cls(app, *self.args, **self.kwargs)

    @classmethod
    def of(cls, value: Iterable[Any]) -> Middleware:
        """`value` as a `Middleware`: one already, or an iterable ``(cls, args, kwargs)``."""
        if isinstance(value, Middleware):
            return value
        try:
            factory, args, kwargs = value
        except (TypeError, ValueError):
            raise TypeError(BAD_MIDDLEWARE.format(value)) from None
        if not callable(factory):
            raise TypeError(BAD_MIDDLEWARE.format(value))
        return cls(factory, *args, **kwargs)

    def __repr__(self) -> str:
        options = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"Middleware({', '.join([self.cls.__name__, *options])})"
