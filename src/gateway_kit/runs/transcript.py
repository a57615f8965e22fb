"""What a run said and did, read from goose's events in the log: the helpers a guard needs.

goose streams one reply text as several ``Message`` events carrying the same ``message.id``,
each with one more chunk (UPSTREAM-GOOSE.md); readers merge the chunks by id. A tool call is a
``toolRequest`` content of an assistant message (``toolCall``: ``{"status", "value": {"name",
"arguments"}}``), answered by a ``toolResponse`` content with the same ``id`` in the next user
message (``toolResult``: ``{"status", "value": {"content", "isError"}}``). The log keeps each
goose event's JSON as goose sent it, so ``event.data["message"]`` is goose's ``Message``.

The text helpers also read the ``Message`` events an app writes itself (`owned_run`), flat:
``{"role", "message_id", "text"}``, one chunk of text each, the chunks of one reply sharing its
``message_id``; such events carry no tool calls.

A goose event too large for the log is kept as ``PayloadDropped`` (`gateway_kit.runs.events`):
its text and tool calls are not in the log, and these helpers do not see them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..log import Event

MESSAGE = "Message"
ASSISTANT = "assistant"
SUCCESS = "success"
FAILED = "error"


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One ``toolRequest`` of a run, with how its ``toolResponse`` went.

    :param status: ``"success"``, ``"error"`` (goose's ``toolResult`` failed, or its result
        says ``isError``), or ``None`` when no response came.
    """

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)
    status: str | None = None

    @property
    def failed(self) -> bool:
        return self.status == FAILED


def _message(event: Event) -> Mapping[str, Any] | None:
    if event.type != MESSAGE:
        return None
    message = event.data.get("message")
    return message if isinstance(message, Mapping) else None


def _text_chunks(event: Event) -> tuple[str | None, object, list[str]] | None:
    """(role, message id, text chunks) of a ``Message`` event, goose's or an app's flat one."""
    message = _message(event)
    if message is not None:
        chunks = [
            item["text"]
            for item in _contents(message)
            if item.get("type") == "text" and isinstance(item.get("text"), str)
        ]
        return message.get("role"), message.get("id"), chunks
    data = event.data if event.type == MESSAGE else {}
    if isinstance(data.get("role"), str) and isinstance(data.get("text"), str):
        return data["role"], data.get("message_id"), [data["text"]]
    return None


def _contents(message: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    content = message.get("content")
    if not isinstance(content, list):
        return ()
    return (item for item in content if isinstance(item, Mapping))


def assistant_texts(events: Iterable[Event]) -> list[str]:
    """The text of each assistant message, its chunks merged by message id, in the order the
    messages began; messages without text are left out. goose's ``Message`` events and an
    app's flat ones are read alike."""
    texts: dict[object, list[str]] = {}
    for position, event in enumerate(events):
        found = _text_chunks(event)
        if found is None or found[0] != ASSISTANT:
            continue
        _, message_id, chunks = found
        key = message_id if isinstance(message_id, str) else ("no id", position)
        texts.setdefault(key, []).extend(chunks)
    return [text for text in ("".join(chunks) for chunks in texts.values()) if text]


def final_assistant_text(events: Iterable[Event]) -> str:
    """The assistant's last text of `events` (its chunks merged by message id): the answer a
    user read when the turn ended; "" when the assistant wrote no text.

    It reads goose's ``Message`` events (``data["message"]``, text contents) and the flat ones
    an app writes through `owned_run` (``{"role": "assistant", "message_id", "text"}``, one
    chunk each), so a guard reads an app's runs as it reads goose's.
    """
    texts = assistant_texts(events)
    return texts[-1] if texts else ""


def tool_calls(events: Iterable[Event]) -> list[ToolCall]:
    """The run's tool calls in the order they were made, each with its response's status.

    A request goose could not parse (its ``toolCall`` failed: no name) is left out; one sent
    again under the same id counts once, as last sent.
    """
    requests: dict[str, tuple[str, Mapping[str, Any]]] = {}
    statuses: dict[str, str] = {}
    for event in events:
        message = _message(event)
        if message is None:
            continue
        for item in _contents(message):
            call_id = item.get("id")
            if not isinstance(call_id, str):
                continue
            if item.get("type") == "toolRequest":
                called = _called(item.get("toolCall"))
                if called is not None:
                    requests[call_id] = called
            elif item.get("type") == "toolResponse":
                statuses[call_id] = _status(item.get("toolResult"))
    return [
        ToolCall(call_id, name, arguments, statuses.get(call_id))
        for call_id, (name, arguments) in requests.items()
    ]


def _called(tool_call: object) -> tuple[str, Mapping[str, Any]] | None:
    if not isinstance(tool_call, Mapping) or tool_call.get("status") != SUCCESS:
        return None
    value = tool_call.get("value")
    if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
        return None
    arguments = value.get("arguments")
    return value["name"], dict(arguments) if isinstance(arguments, Mapping) else {}


def _status(tool_result: object) -> str:
    if not isinstance(tool_result, Mapping) or tool_result.get("status") != SUCCESS:
        return FAILED
    value = tool_result.get("value")
    if isinstance(value, Mapping) and value.get("isError") is True:
        return FAILED
    return SUCCESS
