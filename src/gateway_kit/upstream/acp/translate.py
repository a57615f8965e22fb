"""ACP `session/update`s, as the events goose runs write: pure functions, table-tested.

What a reader of goose's events knows is what an ACP run writes:

- text chunks (``agent_message_chunk``, ``user_message_chunk``) are ``Message`` events, one
  chunk each, the chunks of one message sharing its ``message.id`` (the agent's ``messageId``
  when it sends one; else one id for each run of chunks of one kind), so clients, the demo page
  and the legacy poll merge them as they merge goose's;
- thoughts (``agent_thought_chunk``) are ``Message`` events with goose's ``thinking`` item,
  which the text readers leave out;
- a tool call (``tool_call``) is an assistant ``Message`` with a ``toolRequest`` (name from the
  call's ``_meta``, arguments from its ``rawInput``), sent again when an update changes them;
  its end (``tool_call_update`` with status ``completed`` or ``failed``) is a user ``Message``
  with the ``toolResponse`` (``isError`` when it failed), as the policies read them;
- every other update (plans, modes, commands, usage, a tool's progress, kinds not known yet)
  is an ``AcpUpdate`` event, ``update`` naming its kind;
- the turn ends with one ``Finish`` (``reason``: the stop reason, ``token_state`` from the
  prompt's usage as goose's `Finish` carries it) or one ``Error`` (``error``: its text).

Every event keeps the raw ACP update under ``"acp"`` (on the last event when one update makes
two), and ``chat_request_id`` names the prompt it belongs to, as goose's events name their
request. A chunk's text (or image data) is not repeated under ``"acp"``: its message holds it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ...types import JSONObject
from .content import message_item, thinking_item, tool_result_items, without_carried
from .tools import tool_arguments, tool_name

MESSAGE = "Message"
FINISH = "Finish"
ERROR = "Error"
ACP_UPDATE = "AcpUpdate"  # an update with no counterpart in goose's events

AGENT_MESSAGE_CHUNK = "agent_message_chunk"
AGENT_THOUGHT_CHUNK = "agent_thought_chunk"
USER_MESSAGE_CHUNK = "user_message_chunk"
TOOL_CALL = "tool_call"
TOOL_CALL_UPDATE = "tool_call_update"

END_TURN = "end_turn"
CANCELLED = "cancelled"
STOP_REASONS = frozenset({END_TURN, "max_tokens", "max_turn_requests", "refusal", CANCELLED})
TOOL_ENDED = frozenset({"completed", "failed"})

VISIBLE = {"userVisible": True, "agentVisible": True}
# ACP's `Usage` fields → the names of goose's `token_state`.
TOKEN_NAMES = {
    "inputTokens": "inputTokens",
    "outputTokens": "outputTokens",
    "totalTokens": "totalTokens",
    "cachedReadTokens": "cacheReadTokens",
    "cachedWriteTokens": "cacheWriteTokens",
    "thoughtTokens": "thoughtTokens",
}


class TranslatedEvent(NamedTuple):
    type: str
    data: JSONObject


def _now() -> int:
    return int(time.time())


def _new_prefix() -> str:
    return f"msg_{uuid.uuid4().hex[:16]}"


@dataclass(slots=True)
class _Tool:
    announced: JSONObject  # what the agent said of the call so far, merged
    name: str
    arguments: JSONObject


@dataclass(slots=True)
class TurnState:
    """What translating one turn's updates remembers: the message chunks extend, and the tool
    calls announced (an update often names neither the tool nor its arguments again).

    :param request_id: the prompt's id, written as ``chat_request_id``.
    :param id_prefix: the start of the message ids made for chunks the agent sent without one.
    :param clock: the ``created`` time of messages (seconds).
    """

    request_id: str | None = None
    id_prefix: str = field(default_factory=_new_prefix)
    clock: Callable[[], int] = _now
    open_message: tuple[str, str] | None = None  # (chunk kind, message id) chunks extend
    messages: int = 0
    tools: dict[str, _Tool] = field(default_factory=dict)

    def chunk_message_id(self, kind: str, update: Mapping[str, Any]) -> str:
        given = update.get("messageId")
        if not (isinstance(given, str) and given):
            given = _goose_message_id(update.get("_meta"))
        if given is not None:
            self.open_message = (kind, given)
            return given
        if self.open_message is not None and self.open_message[0] == kind:
            return self.open_message[1]
        made = self.new_message_id()
        self.open_message = (kind, made)
        return made

    def new_message_id(self) -> str:
        self.messages += 1
        return f"{self.id_prefix}_{self.messages}"


def _goose_message_id(meta: object) -> str | None:
    goose = meta.get("goose") if isinstance(meta, Mapping) else None
    given = goose.get("messageId") if isinstance(goose, Mapping) else None
    return given if isinstance(given, str) and given else None


def translate(update: Mapping[str, Any], state: TurnState) -> list[TranslatedEvent]:
    """The events one ACP update (the notification's ``update`` object) becomes."""
    kind = update.get("sessionUpdate")
    if kind in (AGENT_MESSAGE_CHUNK, USER_MESSAGE_CHUNK, AGENT_THOUGHT_CHUNK):
        return [_chunk(str(kind), update, state)]
    if kind in (TOOL_CALL, TOOL_CALL_UPDATE) and isinstance(update.get("toolCallId"), str):
        events = _tool_call(update, state, started=kind == TOOL_CALL)
        if events:
            state.open_message = None
            return events
    return [_acp_update(update, state)]


def _data(state: TurnState, body: JSONObject, acp: JSONObject | None) -> JSONObject:
    if state.request_id is not None:
        body["chat_request_id"] = state.request_id
    if acp is not None:
        body["acp"] = acp
    return body


def _message_event(
    state: TurnState, role: str, message_id: str, content: list[JSONObject], acp: JSONObject | None
) -> TranslatedEvent:
    message = {
        "id": message_id,
        "role": role,
        "created": state.clock(),
        "content": content,
        "metadata": dict(VISIBLE),
    }
    return TranslatedEvent(MESSAGE, _data(state, {"type": MESSAGE, "message": message}, acp))


def _chunk(kind: str, update: Mapping[str, Any], state: TurnState) -> TranslatedEvent:
    block = update.get("content")
    item = thinking_item(block) if kind == AGENT_THOUGHT_CHUNK else message_item(block)
    role = "user" if kind == USER_MESSAGE_CHUNK else "assistant"
    message_id = state.chunk_message_id(kind, update)
    content = [] if item is None else [item]
    return _message_event(state, role, message_id, content, without_carried(update))


def _tool_call(
    update: Mapping[str, Any], state: TurnState, *, started: bool
) -> list[TranslatedEvent]:
    call_id = str(update["toolCallId"])
    known = state.tools.get(call_id)
    said = {k: v for k, v in update.items() if v is not None and k != "sessionUpdate"}
    announced = said if started or known is None else {**known.announced, **said}
    tool = _Tool(announced, tool_name(announced), tool_arguments(announced))
    state.tools[call_id] = tool
    # Each tool request and response is a message of its own, as in goose.
    events: list[TranslatedEvent] = []
    changed = known is None or (known.name, known.arguments) != (tool.name, tool.arguments)
    if started or (changed and _names_the_call(said)):
        request = {
            "type": "toolRequest",
            "id": call_id,
            "toolCall": {
                "status": "success",
                "value": {"name": tool.name, "arguments": tool.arguments},
            },
        }
        events.append(_message_event(state, "assistant", state.new_message_id(), [request], None))
    status = update.get("status")
    if status in TOOL_ENDED:
        result = {
            "content": tool_result_items(update.get("content"), update.get("rawOutput")),
            "isError": status == "failed",
        }
        response = {
            "type": "toolResponse",
            "id": call_id,
            "toolResult": {"status": "success", "value": result},
        }
        events.append(_message_event(state, "user", state.new_message_id(), [response], None))
    if events:
        events[-1].data["acp"] = dict(update)
    return events


def _names_the_call(said: Mapping[str, Any]) -> bool:
    return any(key in said for key in ("rawInput", "title", "kind", "_meta"))


def _acp_update(update: Mapping[str, Any], state: TurnState) -> TranslatedEvent:
    kind = update.get("sessionUpdate")
    body: JSONObject = {"type": ACP_UPDATE, "update": kind if isinstance(kind, str) else None}
    return TranslatedEvent(ACP_UPDATE, _data(state, body, dict(update)))


def stop_reason(reported: str | None, *, cancel_requested: bool) -> str:
    """The run's stop reason: goose up to 1.48 answers a cancelled turn with ``end_turn``, so
    that answer to a turn the gateway cancelled means ``cancelled``; no answer at all (the agent
    ignored the cancel past its deadline) too."""
    if reported is None or (cancel_requested and reported == END_TURN):
        return CANCELLED
    return reported


def token_state(usage: Mapping[str, Any] | None) -> JSONObject | None:
    """A prompt's ACP ``usage`` under the names of goose's ``token_state``."""
    if not isinstance(usage, Mapping):
        return None
    state = {
        name: usage[acp_name]
        for acp_name, name in TOKEN_NAMES.items()
        if isinstance(usage.get(acp_name), int) and not isinstance(usage.get(acp_name), bool)
    }
    return state or None


def finish_event(
    reason: str,
    state: TurnState,
    *,
    reported: str | None = None,
    usage: Mapping[str, Any] | None = None,
) -> TranslatedEvent:
    """The turn's ``Finish``: `reason` as `stop_reason` gives it; `reported` is the agent's own
    ``stopReason`` (None when it never answered)."""
    body: JSONObject = {"type": FINISH, "reason": reason}
    tokens = token_state(usage)
    if tokens is not None:
        body["token_state"] = tokens
    acp: JSONObject = {"stopReason": reported}
    if usage is not None:
        acp["usage"] = dict(usage)
    return TranslatedEvent(FINISH, _data(state, body, acp))


def error_event(
    error: str, state: TurnState, *, rpc_error: Mapping[str, Any] | None = None
) -> TranslatedEvent:
    """The turn's ``Error``; `rpc_error` is the agent's JSON-RPC error object, when it sent one."""
    acp = None if rpc_error is None else {"error": dict(rpc_error)}
    return TranslatedEvent(ERROR, _data(state, {"type": ERROR, "error": error}, acp))
