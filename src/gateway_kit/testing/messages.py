"""goose `Message`s and their content items, built as goosed 1.41.0 sends them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from gateway_kit.types import JSONObject

VISIBLE = {"userVisible": True, "agentVisible": True}
USER_ONLY = {"userVisible": True, "agentVisible": False}  # goose's `Message::user_only()`


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def make_message(
    role: str,
    content: Sequence[JSONObject],
    *,
    message_id: str | None = None,
    metadata: JSONObject | None = None,
) -> JSONObject:
    """A goose `Message` without its `created` time (added when it is sent)."""
    return {
        "id": message_id or new_message_id(),
        "role": role,
        "content": [dict(item) for item in content],
        "metadata": dict(VISIBLE if metadata is None else metadata),
    }


def text_content(text: str) -> JSONObject:
    return {"type": "text", "text": text}


def image_content(data: str, mime_type: str) -> JSONObject:
    return {"type": "image", "data": data, "mimeType": mime_type}


def tool_request_content(call_id: str, name: str, arguments: JSONObject) -> JSONObject:
    return {
        "type": "toolRequest",
        "id": call_id,
        "toolCall": {"status": "success", "value": {"name": name, "arguments": arguments}},
    }


def tool_response_content(
    call_id: str, content: Sequence[JSONObject], *, is_error: bool = False
) -> JSONObject:
    result = {"content": [dict(item) for item in content], "isError": is_error}
    return {
        "type": "toolResponse",
        "id": call_id,
        "toolResult": {"status": "success", "value": result},
    }


def tool_confirmation_content(
    call_id: str, name: str, arguments: JSONObject, prompt: str | None
) -> JSONObject:
    """The `actionRequired` item goose sends in approve mode before it runs a tool."""
    data = {
        "actionType": "toolConfirmation",
        "id": call_id,
        "toolName": name,
        "arguments": dict(arguments),
        "prompt": prompt,
    }
    return {"type": "actionRequired", "data": data}


def elicitation_content(elicitation_id: str, message: str, requested_schema: Any) -> JSONObject:
    """The `actionRequired` item of an MCP elicitation: goose asks the user for data."""
    data = {
        "actionType": "elicitation",
        "id": elicitation_id,
        "message": message,
        "requested_schema": requested_schema,
    }
    return {"type": "actionRequired", "data": data}


def user_message(text: str, *, created: int = 0) -> JSONObject:
    """A user `Message` as a client sends it in `SessionReplyRequest.user_message`."""
    return {**make_message("user", [text_content(text)]), "created": created}


def elicitation_response(
    elicitation_id: str, user_data: Any, *, action: str | None = None, created: int = 0
) -> JSONObject:
    """A user `Message` answering an elicitation, sent as a reply's `user_message`."""
    data = {"actionType": "elicitationResponse", "id": elicitation_id, "user_data": user_data}
    if action is not None:
        data["action"] = action
    item = {"type": "actionRequired", "data": data}
    return {**make_message("user", [item]), "created": created}


def message_text(message: JSONObject) -> str:
    """The text of a `Message`: its text contents joined."""
    content = message.get("content")
    if not isinstance(content, list):
        return ""
    return "".join(
        str(item.get("text", ""))
        for item in content
        if isinstance(item, dict) and item.get("type") == "text"
    )
