"""The fake goose's extensions and tools: what `GET /sessions/{id}/extensions` and
`GET /agent/tools?session_id=…` answer, and what `POST /agent/start` takes as
`extension_overrides`.

A session has the extensions it was started with (`extension_overrides`), else the fake's
defaults. Its tools are those of a catalogue (extension name → its tools' own names), each of
an extension kept by its `available_tools` (an empty or missing list keeps them all), and named
``<extension>__<tool>`` as goose names them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence

from gateway_kit.types import JSONObject

from .wire import BAD_BODY, Reject

DEFAULT_EXTENSIONS: tuple[JSONObject, ...] = (
    {
        "type": "builtin",
        "name": "developer",
        "description": "Shell, file editing and screen reading",
        "display_name": "Developer",
        "bundled": True,
        "timeout": 300,
    },
    {
        "type": "builtin",
        "name": "memory",
        "description": "Remembers facts across sessions",
        "bundled": True,
        "timeout": 300,
    },
)
DEFAULT_TOOLS: Mapping[str, Sequence[str]] = {
    "developer": ("shell", "text_editor", "read_image"),
    "memory": ("remember_memory", "retrieve_memories"),
}


def extension_overrides(body: JSONObject) -> list[JSONObject] | None:
    """`POST /agent/start`'s `extension_overrides`, checked as goose's extractor would."""
    overrides = body.get("extension_overrides")
    if overrides is None:
        return None
    if not isinstance(overrides, list) or not all(
        isinstance(item, dict) and isinstance(item.get("name"), str) for item in overrides
    ):
        raise Reject(422, BAD_BODY.format("`extension_overrides` must be a list of extensions"))
    return copy.deepcopy(overrides)


def session_tools(
    extensions: Sequence[JSONObject], catalogue: Mapping[str, Sequence[str]]
) -> list[JSONObject]:
    """The `ToolInfo`s of a session with these extensions."""
    tools: list[JSONObject] = []
    for extension in extensions:
        name = "_".join(str(extension.get("name", "")).lower().split())
        available = extension.get("available_tools") or []
        for tool in catalogue.get(name, ()):
            if available and tool not in available:
                continue
            description = f"{tool} of {name}"
            tools.append({"name": f"{name}__{tool}", "description": description, "parameters": []})
    return tools
