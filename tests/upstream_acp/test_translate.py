"""ACP updates as the events goose runs write: every update kind, as a table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway_kit.log import Event
from gateway_kit.runs.transcript import assistant_texts, final_assistant_text, tool_calls
from gateway_kit.runs.usage import run_usage
from gateway_kit.upstream.acp.translate import (
    TurnState,
    error_event,
    finish_event,
    stop_reason,
    token_state,
    translate,
)

VISIBLE = {"userVisible": True, "agentVisible": True}


def state() -> TurnState:
    return TurnState(request_id="req_1", id_prefix="m", clock=lambda: 1700000000)


def message(role: str, message_id: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": message_id,
        "role": role,
        "created": 1700000000,
        "content": list(content),
        "metadata": VISIBLE,
    }


def text_chunk(text: str, **more: Any) -> dict[str, Any]:
    return {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text},
        **more,
    }


GOOSE_SHELL_META = {"goose": {"toolCall": {"toolName": "developer__shell", "extensionName": "x"}}}
TOOL_CALL = {
    "sessionUpdate": "tool_call",
    "toolCallId": "call_1",
    "title": "developer: shell · ls",
    "kind": "execute",
    "status": "pending",
    "rawInput": {"command": "ls"},
    "_meta": GOOSE_SHELL_META,
}
TOOL_DONE = {
    "sessionUpdate": "tool_call_update",
    "toolCallId": "call_1",
    "status": "completed",
    "content": [{"type": "content", "content": {"type": "text", "text": "a.txt"}}],
}
SHELL_REQUEST = {
    "type": "toolRequest",
    "id": "call_1",
    "toolCall": {
        "status": "success",
        "value": {"name": "developer__shell", "arguments": {"command": "ls"}},
    },
}


def response(call_id: str, content: list[dict[str, Any]], *, error: bool) -> dict[str, Any]:
    value = {"content": content, "isError": error}
    return {
        "type": "toolResponse",
        "id": call_id,
        "toolResult": {"status": "success", "value": value},
    }


# (what came before, the update, the events it becomes: (type, data without "acp"))
TABLE: list[tuple[str, list[dict[str, Any]], dict[str, Any], list[tuple[str, dict[str, Any]]]]] = [
    (
        "agent text",
        [],
        text_chunk("Hel"),
        [("Message", {"message": message("assistant", "m_1", {"type": "text", "text": "Hel"})})],
    ),
    (
        "the agent's own message id",
        [],
        text_chunk("Hel", messageId="msg_9"),
        [("Message", {"message": message("assistant", "msg_9", {"type": "text", "text": "Hel"})})],
    ),
    (
        "goose's message id under _meta",
        [],
        text_chunk("Hel", _meta={"goose": {"messageId": "g_7", "created": 5}}),
        [("Message", {"message": message("assistant", "g_7", {"type": "text", "text": "Hel"})})],
    ),
    (
        "a second chunk extends the message",
        [text_chunk("Hel")],
        text_chunk("lo"),
        [("Message", {"message": message("assistant", "m_1", {"type": "text", "text": "lo"})})],
    ),
    (
        "a thought",
        [],
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}},
        [
            (
                "Message",
                {
                    "message": message(
                        "assistant", "m_1", {"type": "thinking", "thinking": "hmm", "signature": ""}
                    )
                },
            )
        ],
    ),
    (
        "text after a thought is a message of its own",
        [{"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hmm"}}],
        text_chunk("Hi"),
        [("Message", {"message": message("assistant", "m_2", {"type": "text", "text": "Hi"})})],
    ),
    (
        "the user's text (a replay)",
        [],
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}},
        [("Message", {"message": message("user", "m_1", {"type": "text", "text": "hi"})})],
    ),
    (
        "an image",
        [],
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "image", "data": "AAAA", "mimeType": "image/png"},
        },
        [
            (
                "Message",
                {
                    "message": message(
                        "assistant",
                        "m_1",
                        {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                    )
                },
            )
        ],
    ),
    (
        "an embedded text resource",
        [],
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "resource", "resource": {"uri": "file:///a", "text": "body"}},
        },
        [("Message", {"message": message("assistant", "m_1", {"type": "text", "text": "body"})})],
    ),
    (
        "a link to a resource: no goose item",
        [],
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "resource_link", "uri": "file:///a", "name": "a"},
        },
        [("Message", {"message": message("assistant", "m_1")})],
    ),
    (
        "a tool call",
        [],
        TOOL_CALL,
        [("Message", {"message": message("assistant", "m_1", SHELL_REQUEST)})],
    ),
    (
        "its progress",
        [TOOL_CALL],
        {"sessionUpdate": "tool_call_update", "toolCallId": "call_1", "status": "in_progress"},
        [("AcpUpdate", {"update": "tool_call_update"})],
    ),
    (
        "its end",
        [TOOL_CALL],
        TOOL_DONE,
        [
            (
                "Message",
                {
                    "message": message(
                        "user",
                        "m_2",
                        response("call_1", [{"type": "text", "text": "a.txt"}], error=False),
                    )
                },
            )
        ],
    ),
    (
        "its failure, its raw output as text",
        [TOOL_CALL],
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "status": "failed",
            "rawOutput": {"exit": 2},
        },
        [
            (
                "Message",
                {
                    "message": message(
                        "user",
                        "m_2",
                        response("call_1", [{"type": "text", "text": '{"exit": 2}'}], error=True),
                    )
                },
            )
        ],
    ),
    (
        "arguments told in an update: the request is sent again",
        [{**TOOL_CALL, "rawInput": {}}],
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call_1",
            "rawInput": {"command": "ls"},
        },
        [("Message", {"message": message("assistant", "m_2", SHELL_REQUEST)})],
    ),
    (
        "a tool call that arrives ended (a replay): request and response",
        [],
        {**TOOL_CALL, **{k: v for k, v in TOOL_DONE.items() if k != "sessionUpdate"}},
        [
            ("Message", {"message": message("assistant", "m_1", SHELL_REQUEST)}),
            (
                "Message",
                {
                    "message": message(
                        "user",
                        "m_2",
                        response("call_1", [{"type": "text", "text": "a.txt"}], error=False),
                    )
                },
            ),
        ],
    ),
    (
        "a tool call named by another agent's _meta",
        [],
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "t",
            "title": "`ls`",
            "kind": "execute",
            "rawInput": {"command": "ls"},
            "_meta": {"claudeCode": {"toolName": "Bash"}},
        },
        [
            (
                "Message",
                {
                    "message": message(
                        "assistant",
                        "m_1",
                        {
                            "type": "toolRequest",
                            "id": "t",
                            "toolCall": {
                                "status": "success",
                                "value": {"name": "Bash", "arguments": {"command": "ls"}},
                            },
                        },
                    )
                },
            )
        ],
    ),
    (
        "a plan",
        [],
        {
            "sessionUpdate": "plan",
            "entries": [{"content": "a", "priority": "high", "status": "pending"}],
        },
        [("AcpUpdate", {"update": "plan"})],
    ),
    (
        "the commands offered",
        [],
        {"sessionUpdate": "available_commands_update", "availableCommands": []},
        [("AcpUpdate", {"update": "available_commands_update"})],
    ),
    (
        "the mode",
        [],
        {"sessionUpdate": "current_mode_update", "currentModeId": "approve"},
        [("AcpUpdate", {"update": "current_mode_update"})],
    ),
    (
        "the session's info",
        [],
        {"sessionUpdate": "session_info_update", "title": "t"},
        [("AcpUpdate", {"update": "session_info_update"})],
    ),
    (
        "usage the SDK cannot parse",
        [],
        {
            "sessionUpdate": "usage_update",
            "used": 1.5,
            "size": None,
            "cost": {"amount": 0.01, "currency": "USD"},
        },
        [("AcpUpdate", {"update": "usage_update"})],
    ),
    (
        "a kind not known yet",
        [],
        {"sessionUpdate": "brand_new_kind", "x": 1},
        [("AcpUpdate", {"update": "brand_new_kind"})],
    ),
    (
        "no kind at all",
        [],
        {"x": 1},
        [("AcpUpdate", {"update": None})],
    ),
]


@pytest.mark.parametrize(
    ("before", "update", "expected"), [row[1:] for row in TABLE], ids=[row[0] for row in TABLE]
)
def test_an_update_becomes_the_events_goose_runs_write(
    before: list[dict[str, Any]], update: dict[str, Any], expected: list[tuple[str, dict[str, Any]]]
) -> None:
    turn = state()
    for earlier in before:
        translate(earlier, turn)
    events = translate(update, turn)
    assert [(e.type, {k: v for k, v in e.data.items() if k != "acp"}) for e in events] == [
        (kind, {"type": kind, **data, "chat_request_id": "req_1"}) for kind, data in expected
    ]
    # The raw update stays beside the last event; a chunk's text or image data is not repeated.
    assert events[-1].data["acp"] == raw_kept(update)
    assert all("acp" not in event.data for event in events[:-1])


def raw_kept(update: dict[str, Any]) -> dict[str, Any]:
    content = update.get("content")
    if str(update.get("sessionUpdate")).endswith("_chunk") and content["type"] in ("text", "image"):
        return {
            **update,
            "content": {k: v for k, v in content.items() if k not in ("text", "data")},
        }
    return update


def logged(seq: int, type: str, data: dict[str, Any]) -> Event:
    return Event(seq, "s", seq, "run_1", type, json.dumps(data), None, 0.0)


def as_events(translated: list[Any]) -> list[Event]:
    return [logged(i + 1, e.type, e.data) for i, e in enumerate(translated)]


def test_the_policies_read_an_acp_turn_as_a_goose_one() -> None:
    turn = state()
    updates = [
        {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "plan"}},
        text_chunk("I will "),
        text_chunk("look."),
        TOOL_CALL,
        TOOL_DONE,
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "call_2",
            "title": "write",
            "rawInput": {"path": "public/a.html", "file_text": "<p>"},
            "_meta": {"goose": {"toolCall": {"toolName": "developer__text_editor"}}},
        },
        {"sessionUpdate": "tool_call_update", "toolCallId": "call_2", "status": "failed"},
        text_chunk("Done: "),
        text_chunk("published."),
    ]
    translated = [event for update in updates for event in translate(update, turn)]
    translated.append(
        finish_event(
            "end_turn",
            turn,
            reported="end_turn",
            usage={"inputTokens": 7, "outputTokens": 2, "totalTokens": 9},
        )
    )
    events = as_events(translated)
    assert assistant_texts(events) == ["I will look.", "Done: published."]
    assert final_assistant_text(events) == "Done: published."
    calls = tool_calls(events)
    assert [(c.id, c.name, dict(c.arguments), c.status) for c in calls] == [
        ("call_1", "developer__shell", {"command": "ls"}, "success"),
        (
            "call_2",
            "developer__text_editor",
            {"path": "public/a.html", "file_text": "<p>"},
            "error",
        ),
    ]
    finish = [e for e in events if e.type == "Finish"]
    stored = [logged(1, "UpstreamFinish", finish[0].data)]  # as the log keeps the agent's end
    usage = run_usage(stored, attempts=1)
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (7, 2, 9)


@pytest.mark.parametrize(
    ("reported", "cancel_requested", "expected"),
    [
        ("end_turn", False, "end_turn"),
        ("max_tokens", False, "max_tokens"),
        ("max_turn_requests", False, "max_turn_requests"),
        ("refusal", False, "refusal"),
        ("cancelled", True, "cancelled"),
        ("end_turn", True, "cancelled"),  # goose up to 1.48 answers a cancel so
        ("max_tokens", True, "max_tokens"),
        (None, True, "cancelled"),  # the agent never answered the cancel
    ],
)
def test_the_stop_reason_of_a_run(
    reported: str | None, cancel_requested: bool, expected: str
) -> None:
    assert stop_reason(reported, cancel_requested=cancel_requested) == expected


def test_finish_carries_the_reason_and_the_usage_as_goose_token_state() -> None:
    usage = {
        "totalTokens": 12,
        "inputTokens": 8,
        "outputTokens": 4,
        "thoughtTokens": 1,
        "cachedReadTokens": 3,
        "cachedWriteTokens": 0,
    }
    event = finish_event("cancelled", state(), reported="end_turn", usage=usage)
    assert event.type == "Finish"
    assert event.data == {
        "type": "Finish",
        "reason": "cancelled",
        "token_state": {
            "inputTokens": 8,
            "outputTokens": 4,
            "totalTokens": 12,
            "cacheReadTokens": 3,
            "cacheWriteTokens": 0,
            "thoughtTokens": 1,
        },
        "chat_request_id": "req_1",
        "acp": {"stopReason": "end_turn", "usage": usage},
    }
    assert token_state(None) is None
    assert token_state({"inputTokens": True}) is None


def test_error_carries_its_text_and_the_agents_error_object() -> None:
    rpc = {"code": -32603, "message": "Internal error", "data": "Error in agent response stream: x"}
    event = error_event("the agent answered ...", state(), rpc_error=rpc)
    assert event == (
        "Error",
        {
            "type": "Error",
            "error": "the agent answered ...",
            "chat_request_id": "req_1",
            "acp": {"error": rpc},
        },
    )
    assert error_event("gone", TurnState()).data == {"type": "Error", "error": "gone"}
