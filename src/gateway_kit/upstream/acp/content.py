"""ACP content, as the content items of goose's `Message`s that the gateway's readers know.

An ACP content block (``text``, ``image``, ``audio``, ``resource_link``, ``resource``) becomes
the goose item a reader of goose's events already reads: text as ``{"type": "text"}``, an image
as ``{"type": "image", "data", "mimeType"}``, the text of an embedded resource as text. What has
no goose counterpart (audio, a link to a resource, a binary resource, a diff or a terminal in a
tool call's content) becomes no item: the raw ACP update kept beside the event still holds it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ...types import JSONObject

TEXT = "text"
IMAGE = "image"
RESOURCE = "resource"
# A tool call's content items: a content block, a diff of a file, a terminal's output.
TOOL_CONTENT = "content"


def message_item(block: object) -> JSONObject | None:
    """The goose content item of one ACP content block, or None when it has none."""
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == TEXT and isinstance(block.get("text"), str):
        return {"type": TEXT, "text": block["text"]}
    if kind == IMAGE and isinstance(block.get("data"), str):
        return {"type": IMAGE, "data": block["data"], "mimeType": str(block.get("mimeType", ""))}
    if kind == RESOURCE:
        resource = block.get("resource")
        if isinstance(resource, Mapping) and isinstance(resource.get("text"), str):
            return {"type": TEXT, "text": resource["text"]}
    return None


def thinking_item(block: object) -> JSONObject | None:
    """A thought's text as goose's ``thinking`` item (which the text readers leave out)."""
    item = message_item(block)
    if item is None or item["type"] != TEXT:
        return None
    return {"type": "thinking", "thinking": item["text"], "signature": ""}


def tool_result_items(content: object, raw_output: object = None) -> list[JSONObject]:
    """A tool call's result as goose items: its content blocks, else its raw output as text."""
    items: list[JSONObject] = []
    if isinstance(content, Sequence) and not isinstance(content, str):
        for entry in content:
            if isinstance(entry, Mapping) and entry.get("type") == TOOL_CONTENT:
                item = message_item(entry.get("content"))
                if item is not None:
                    items.append(item)
    if not items and raw_output is not None:
        items.append({"type": TEXT, "text": as_text(raw_output)})
    return items


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def without_carried(update: Mapping[str, Any]) -> JSONObject:
    """A chunk's update with the text or image data its message already carries left out, so
    that the log does not hold every chunk twice."""
    content = update.get("content")
    if isinstance(content, Mapping) and content.get("type") in (TEXT, IMAGE):
        kept = {key: value for key, value in content.items() if key not in ("text", "data")}
        return {**update, "content": kept}
    return dict(update)
