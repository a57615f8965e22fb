"""The two sides of a check, from MODULE:ATTR: the app alone, and the app wrapped.

MODULE:ATTR names an app (WSGI such as Flask, or ASGI), wrapped as ``Gateway(app,
log=EventLog(<a fresh SQLite file>))`` with nothing else; or a `Gateway`, which is the wrapped
side as it is, and whose wrapped app, as it was given, is the app alone.

The sides must share no state in memory, so MODULE is imported twice: once for each side.
The second time, MODULE, the modules under it and every module of the user's own that the
first import loaded (a file under the current directory, outside any ``site-packages``) are
imported anew; libraries are not. Afterwards the first copies are the ones ``sys.modules``
keeps. What is on disk (a database the app opens) is shared.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ..exceptions import GatewayKitError
from ..gateway import Gateway, is_wsgi
from ..log import EventLog
from ..types import ASGIApp
from .threaded_wsgi import ThreadedWSGI

LIBRARY_FOLDERS = ("site-packages", "dist-packages")
BAD_TARGET = "{spec!r} is not MODULE:ATTR, such as myapp.web:app"
NO_MODULE = "cannot import {module!r}: {error}"
NO_ATTRIBUTE = "module {module!r} has no attribute {attr!r}"
NOT_AN_APP = "{spec} is {kind}, not an app: name a Flask (WSGI) app, an ASGI app or a Gateway"
UNKNOWN_KIND = "cannot tell whether {spec} is a WSGI or an ASGI app"
NO_APP = "{spec} is a Gateway around no app: there is nothing to compare"


class TargetError(GatewayKitError):
    """MODULE:ATTR cannot be loaded, or is no app and no Gateway."""


@dataclass(frozen=True, slots=True)
class Sides:
    app: ASGIApp  # the app alone
    gateway: ASGIApp  # the app wrapped


@contextmanager
def sides_of(spec: str, *, max_body: int) -> Iterator[Sides]:
    """The two sides MODULE:ATTR names; a log made for them is closed and deleted after."""
    module_name, _, attrs = spec.partition(":")
    if not module_name or not attrs:
        raise TargetError(BAD_TARGET.format(spec=spec))
    first, second = import_twice(module_name)
    wrapped, alone = attribute(first, module_name, attrs), attribute(second, module_name, attrs)
    with ExitStack() as cleanup:
        if isinstance(wrapped, Gateway) and isinstance(alone, Gateway):
            app, wsgi = alone.plugins.context.app, alone.wsgi
            if app is None:
                raise TargetError(NO_APP.format(spec=spec))
            cleanup.callback(alone.log.close)  # the second copy's own: it serves no request
            gateway = wrapped
        else:
            wsgi = kind_of_app(wrapped, spec)
            folder = cleanup.enter_context(tempfile.TemporaryDirectory(prefix="adopt-check-"))
            log = EventLog(f"sqlite:///{Path(folder) / 'gateway.db'}")
            cleanup.callback(log.close)
            gateway, app = Gateway(wrapped, log=log), alone
        yield Sides(ThreadedWSGI(app, max_body=max_body) if wsgi else app, gateway)  # type: ignore[arg-type]


def attribute(module: ModuleType, module_name: str, attrs: str) -> object:
    target: object = module
    for attr in attrs.split("."):
        try:
            target = getattr(target, attr)
        except AttributeError:
            raise TargetError(NO_ATTRIBUTE.format(module=module_name, attr=attrs)) from None
    return target


def kind_of_app(target: object, spec: str) -> bool:
    """Whether `target` is a WSGI app (else ASGI); `TargetError` when it is no app."""
    if not callable(target) or isinstance(target, type):
        kind = "a module" if isinstance(target, ModuleType) else f"a {type(target).__name__}"
        raise TargetError(NOT_AN_APP.format(spec=spec, kind=kind))
    try:
        return is_wsgi(target)
    except TypeError:
        raise TargetError(UNKNOWN_KIND.format(spec=spec)) from None


def import_twice(name: str) -> tuple[ModuleType, ModuleType]:
    """MODULE imported, then imported anew with the user's own modules (see above)."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's modules, as uvicorn finds them
    before = set(sys.modules)
    first = import_named(name)
    fresh = [
        loaded
        for loaded, module in sys.modules.items()
        if loaded == name
        or loaded.startswith(f"{name}.")
        or (loaded not in before and is_users_own(module))
    ]
    kept = {loaded: sys.modules.pop(loaded) for loaded in fresh}
    try:
        second = import_named(name)
    finally:
        sys.modules.update(kept)
        for loaded, module in kept.items():
            parent, _, child = loaded.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, module)
    return first, second


def import_named(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except Exception as exc:  # whatever the user's module raises: one line, no traceback
        raise TargetError(NO_MODULE.format(module=name, error=exc)) from exc


def is_users_own(module: ModuleType) -> bool:
    path = getattr(module, "__file__", None)
    if not path:
        return False
    resolved = Path(path).resolve()
    return resolved.is_relative_to(Path.cwd().resolve()) and not any(
        part in LIBRARY_FOLDERS for part in resolved.parts
    )
