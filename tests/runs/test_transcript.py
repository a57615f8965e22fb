"""`final_assistant_text` and `tool_calls` on a run's events as the log keeps them, through the
fake goose: chunks merged by goose's message id, tool calls with their responses' status; and
the flat `Message` events an app writes itself through `owned_run`, read the same way."""

from __future__ import annotations

import asyncio
import json

from gateway_kit import Event, EventLog, ToolCall, final_assistant_text, owned_run, tool_calls
from gateway_kit.testing import FakeGoose, Turn
from tests.support.runs import bound_session, gateway_client, start_run, wait_status
from tests.support.waiting import settled


def test_a_runs_text_and_tool_calls_read_back_from_its_events(log_url: str) -> None:
    turn = (
        Turn()
        .text("Let me ", "write it.", message_id="msg_first")
        .tool_call("write_file", {"path": "public/x.html", "content": "<p>x</p>"}, call_id="c1")
        .tool_call("developer__shell", {"command": "ls"}, is_error=True, call_id="c2")
        .text("页面", "已生成: ", "public/x.html", message_id="msg_last")
        .usage(input_tokens=3, output_tokens=4)
    )

    async def main() -> list[object]:
        fake = FakeGoose(ping_interval=0.05)
        async with gateway_client(log_url, fake) as (client, gateway, log):
            bound_session(fake, gateway, turn)
            run_id = await start_run(client, "go")
            await wait_status(client, run_id, "finished")
            return list(log.read(run_id=run_id))

    events = asyncio.run(main())
    assert final_assistant_text(events) == "页面已生成: public/x.html"
    first_turn = [
        e for e in events if e.type == "Message" and e.data["message"]["id"] == "msg_first"
    ]
    assert final_assistant_text(first_turn) == "Let me write it."
    assert tool_calls(events) == [
        ToolCall("c1", "write_file", {"path": "public/x.html", "content": "<p>x</p>"}, "success"),
        ToolCall("c2", "developer__shell", {"command": "ls"}, "error"),
    ]
    assert tool_calls(events)[1].failed and final_assistant_text([]) == ""


def test_a_request_without_its_response_has_no_status() -> None:
    request = {
        "type": "Message",
        "message": {
            "id": "m",
            "role": "assistant",
            "content": [
                {"type": "toolRequest", "id": "c", "toolCall": {"status": "error", "error": "?"}},
                {
                    "type": "toolRequest",
                    "id": "d",
                    "toolCall": {"status": "success", "value": {"name": "w"}},
                },
            ],
        },
    }
    event = Event(1, "s", 1, "r", "Message", json.dumps(request), "1", 0.0)
    assert tool_calls([event]) == [ToolCall("d", "w", {}, None)]


def test_an_apps_own_flat_messages_are_merged_by_message_id(log: EventLog) -> None:
    def say(message_id: str, *chunks: str, role: str = "assistant") -> None:
        for chunk in chunks:
            run.append("Message", {"role": role, "message_id": message_id, "text": chunk})

    with owned_run(log, stream="conversation", run_id="task-1") as run:
        say("m_user", "make the report", role="user")
        say("m_1", "Working ", "on it.")
        say("m_2", "Done: the page ", "is published at ", "public/report.html")
    with owned_run(log, stream="conversation", run_id="task-2") as run:
        say("m_user_2", "only a question", role="user")

    settled(log)
    events = list(log.read(run_id="task-1"))
    assert final_assistant_text(events) == "Done: the page is published at public/report.html"
    first = [e for e in events if e.data.get("message_id") == "m_1"]
    assert final_assistant_text(first) == "Working on it."
    assert tool_calls(events) == []  # an app's flat messages carry no tool calls
    assert final_assistant_text(list(log.read(run_id="task-2"))) == ""  # the user's text is not
