"""Finding plugins in installed distributions, through the ``gateway_kit`` entry-point group.

gateway_kit's own built-in plugins are registered the same way, by this distribution's entry
points; they load even when loading other distributions' plugins is switched off.

An entry point names a module or a class. A module is imported once per process, so every
gateway of the process shares it (and whatever settings it keeps); a class is instantiated for
each gateway, which thus gets a plugin object, and settings, of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import metadata

from ..exceptions import PluginError
from .markers import PROJECT

ENTRY_POINT_GROUP = PROJECT
BUILTIN_DISTRIBUTION = "gateway-kit"

BUILT_IN = "built-in"
ENTRY_POINT = "entry point"
PASSED_IN = "passed in"

CANNOT_LOAD = "cannot load plugin {name!r} (entry point of {dist}): {error}"
NO_BUILTINS = (
    "gateway_kit's built-in plugins are not registered: its distribution's entry points are "
    "missing. Install gateway_kit (pip install gateway-kit, or pip install -e . in a checkout)."
)


@dataclass(frozen=True, slots=True)
class PluginSource:
    """Where a plugin came from."""

    kind: str  # BUILT_IN, ENTRY_POINT or PASSED_IN
    distribution: str | None = None
    version: str | None = None

    def __str__(self) -> str:
        if self.distribution is None:
            return self.kind
        return f"{self.kind} ({self.distribution} {self.version})"


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def entry_points() -> Iterator[tuple[metadata.EntryPoint, PluginSource]]:
    """Every entry point of the group, built-ins first, each with where it comes from."""
    found = []
    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        dist = entry.dist
        name = dist.name if dist is not None else "an unknown distribution"
        version = dist.version if dist is not None else None
        builtin = dist is not None and _normalized(dist.name) == BUILTIN_DISTRIBUTION
        found.append((entry, PluginSource(BUILT_IN if builtin else ENTRY_POINT, name, version)))
    if not any(source.kind == BUILT_IN for _, source in found):
        raise PluginError(NO_BUILTINS)
    found.sort(key=lambda item: (item[1].kind != BUILT_IN, item[0].name))
    yield from found


def load(entry: metadata.EntryPoint, source: PluginSource) -> object:
    """The plugin object the entry point names: a module as it is, a class instantiated."""
    try:
        plugin = entry.load()
        return plugin() if isinstance(plugin, type) else plugin
    except Exception as exc:
        raise PluginError(
            CANNOT_LOAD.format(name=entry.name, dist=source.distribution, error=exc)
        ) from exc
