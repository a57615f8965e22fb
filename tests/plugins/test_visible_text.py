"""The conversation's visible text that a clean session starts from (`visible_text`)."""

from __future__ import annotations

from typing import Any

from gateway_kit_plugins.visible_text import visible_text

from gateway_kit import EventLog


def goose_message(role: str, content: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    message = {"role": role, "created": 0, "content": content, "metadata": {}, **fields}
    return {"type": "Message", "message": message, "chat_request_id": "req"}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], m["content"][0]["text"]) for m in messages]


def test_user_and_assistant_text_only_chunks_merged_tools_and_images_left_out(
    log: EventLog,
) -> None:
    log.append("conv", "RunStarted", {"message": "draw a cat"}, run_id="r1")
    log.append("conv", "Message", goose_message("assistant", [text("Sure, ")], id="m1"), "r1")
    log.append("conv", "Message", goose_message("assistant", [text("drawing.")], id="m1"), "r1")
    request = {"type": "toolRequest", "id": "c1", "toolCall": {"status": "success"}}
    log.append("conv", "Message", goose_message("assistant", [request], id="m2"), "r1")
    image = {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    response = {"type": "toolResponse", "id": "c1", "toolResult": {"value": [image]}}
    log.append("conv", "Message", goose_message("user", [response], id="m3"), "r1")
    thinking = {"type": "thinking", "thinking": "hmm", "signature": "s"}
    log.append("conv", "Message", goose_message("assistant", [thinking], id="m4"), "r1")
    hidden = goose_message("assistant", [text("internal note")], id="m5")
    hidden["message"]["metadata"] = {"userVisible": False, "agentVisible": True}
    log.append("conv", "Message", hidden, "r1")
    log.append("conv", "Message", goose_message("assistant", [text("Done.")], id="m6"), "r1")
    log.append("other", "RunStarted", {"message": "not this conversation"}, run_id="r9")
    log.append("conv", "RunStarted", {"message": "now look at it"}, run_id="r2")

    messages = visible_text(log, "conv", leave_out_run="r2")

    assert said(messages) == [("user", "draw a cat"), ("assistant", "Sure, drawing.\n\nDone.")]
    assert all(m["metadata"] == {"userVisible": True, "agentVisible": True} for m in messages)
    assert said(visible_text(log, "conv"))[-1] == ("user", "now look at it")


def test_a_long_conversation_keeps_its_newest_text_within_the_bound(log: EventLog) -> None:
    for number in range(30):
        log.append(
            "conv", "RunStarted", {"message": f"question {number:02} " + "x" * 80}, f"r{number}"
        )
        answer = goose_message("assistant", [text(f"answer {number:02}")], id=f"m{number}")
        log.append("conv", "Message", answer, f"r{number}")

    messages = visible_text(log, "conv", max_chars=500)

    size = sum(len(m["content"][0]["text"]) for m in messages)
    assert size <= 500 + 2 * len(messages)  # the blank lines between merged texts
    assert said(messages)[-1] == ("assistant", "answer 29")
    assert "question 00" not in str(messages)
