"""A tool call's name and arguments, read from what an ACP agent says of it.

ACP gives a tool call a human title and a kind (``read``, ``edit``, ``execute``, ...), not the
tool's name; the policies match tool names (``developer__text_editor``). Agents put the real
name in the tool call's ``_meta``: goose under ``_meta.goose.toolCall.toolName``, others under
``_meta.<agent>.toolName``. Without it the title stands for the name, then the kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...types import JSONObject

UNNAMED = "tool"
NAME_KEYS = ("toolName", "tool_name")


def tool_name(tool_call: Mapping[str, Any]) -> str:
    named = meta_tool_name(tool_call.get("_meta"))
    if named:
        return named
    for key in ("title", "kind"):
        value = tool_call.get(key)
        if isinstance(value, str) and value:
            return value
    return UNNAMED


def meta_tool_name(meta: object) -> str | None:
    """The tool name an agent put in a tool call's `_meta`, one or two levels down."""
    if not isinstance(meta, Mapping):
        return None
    for vendor in meta.values():
        if not isinstance(vendor, Mapping):
            continue
        for place in (vendor, vendor.get("toolCall")):
            if not isinstance(place, Mapping):
                continue
            for key in NAME_KEYS:
                value = place.get(key)
                if isinstance(value, str) and value:
                    return value
    return None


def tool_arguments(tool_call: Mapping[str, Any]) -> JSONObject:
    """The call's ``rawInput``: an object as is, anything else under ``"input"``."""
    raw = tool_call.get("rawInput")
    if raw is None:
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    return {"input": raw}
