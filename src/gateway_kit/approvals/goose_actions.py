"""What goose asks and answers inside its `Message` events, as far as approvals go.

goose (1.41, in ``approve`` or ``smart_approve`` mode) asks with a `Message` whose content holds
an ``actionRequired`` item: a ``toolConfirmation`` (the tool request's id, the tool's name and
arguments, a prompt) or an ``elicitation`` (an id, a message, the schema of the answer). The
proof that a tool confirmation arrived is the ``toolResponse`` with that id that follows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..types import JSONObject
from .model import Kind

ACTION_REQUIRED = "actionRequired"
TOOL_RESPONSE = "toolResponse"
TOOL_CONFIRMATION = "toolConfirmation"
ELICITATION = "elicitation"
MESSAGE = "Message"


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """One confirmation goose waits for."""

    kind: str
    request_id: str
    tool_name: str | None
    arguments: JSONObject
    prompt: str | None


def _contents(data: Any) -> list[Any]:
    if not isinstance(data, dict) or data.get("type") != MESSAGE:
        return []
    message = data.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, list) else []


def _request(item: Any) -> ActionRequest | None:
    if not isinstance(item, dict) or item.get("type") != ACTION_REQUIRED:
        return None
    data = item.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("id"), str) or not data["id"]:
        return None
    prompt = data.get("prompt")
    prompt = prompt if isinstance(prompt, str) else None
    if data.get("actionType") == TOOL_CONFIRMATION and isinstance(data.get("toolName"), str):
        arguments = data.get("arguments")
        arguments = arguments if isinstance(arguments, dict) else {}
        return ActionRequest(
            Kind.TOOL_CONFIRMATION, data["id"], data["toolName"], arguments, prompt
        )
    if data.get("actionType") == ELICITATION:
        message = data.get("message")
        asked = {
            "message": message if isinstance(message, str) else "",
            "requested_schema": data.get("requested_schema"),
        }
        return ActionRequest(Kind.ELICITATION, data["id"], None, asked, asked["message"])
    return None


def action_requests(data: Any) -> list[ActionRequest]:
    """The confirmations a goose event asks for (none for most events)."""
    found = (_request(item) for item in _contents(data))
    return [request for request in found if request is not None]


def tool_response_ids(data: Any) -> list[str]:
    """The ids of the tool responses a goose event carries."""
    return [
        item["id"]
        for item in _contents(data)
        if isinstance(item, dict)
        and item.get("type") == TOOL_RESPONSE
        and isinstance(item.get("id"), str)
    ]
