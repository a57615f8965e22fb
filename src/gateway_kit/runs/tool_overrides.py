"""The extensions of a recovery's clean session: the failed session's, less some tools.

goose (1.41) names an agent's tools ``<extension>__<tool>`` (`GET /agent/tools`), while an
extension's ``available_tools`` lists its tools by their own names, an empty list meaning all
of them. To leave one tool out, its extension gets the list of every other tool it has.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

TOOL_SEPARATOR = "__"


def extension_key(name: str) -> str:
    """An extension's name as goose prefixes its tools with it (lower case, `_` for blanks)."""
    return "_".join(name.lower().split())


def tools_by_extension(tools: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """`GET /agent/tools`'s answer as {extension key: [its tools' own names]}."""
    found: dict[str, list[str]] = {}
    for tool in tools:
        extension, separator, name = str(tool.get("name", "")).partition(TOOL_SEPARATOR)
        if separator and name:
            found.setdefault(extension_key(extension), []).append(name)
    return found


def without_tools(
    extensions: Sequence[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]],
    dropped: Sequence[str],
) -> list[dict[str, Any]]:
    """`extensions` as `extension_overrides`, each keeping every tool but those `dropped`
    (a tool's own name: in any extension; ``extension__tool``: in that one).

    An extension left with no tool is left out: an empty ``available_tools`` would give it
    all of them again.
    """
    catalogue = tools_by_extension(tools)
    overrides: list[dict[str, Any]] = []
    for extension in extensions:
        config = dict(extension)
        key = extension_key(str(config.get("name", "")))
        listed = config.get("available_tools")
        available = [str(t) for t in listed] if listed else catalogue.get(key, [])
        kept = [tool for tool in available if not _dropped(key, tool, dropped)]
        if len(kept) < len(available):
            if not kept:
                continue
            config["available_tools"] = kept
        overrides.append(config)
    return overrides


def _dropped(extension: str, tool: str, dropped: Sequence[str]) -> bool:
    for name in dropped:
        owner, separator, own_name = name.partition(TOOL_SEPARATOR)
        if separator and extension_key(owner) == extension and own_name == tool:
            return True
        if not separator and name == tool:
            return True
    return False
