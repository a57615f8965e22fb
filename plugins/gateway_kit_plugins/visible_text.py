"""The conversation's visible text, as the first messages of a clean goose session.

Shared by the recoveries that start a conversation again in a new session (`visual_fallback`,
`tool_history_recovery`): the old session's history is what failed (an image a text-only model
refuses, tool calls without their results), so the new one gets only what a reader of the
conversation saw, read from the stream's events in the log: the user's messages (each run's
``RunStarted``) and the assistant's text (goose's ``Message`` events, chunks merged by message
id). Tool calls, tool results, images, thinking and messages goose marks invisible to the user are
left out. The newest text is kept up to `max_chars`, so a long conversation costs a bounded read.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any

from gateway_kit import RecoveryPlan
from gateway_kit.log import Event, EventLog
from gateway_kit.runs.events import RUN_STARTED

GOOSE_MESSAGE = "Message"
READ_BATCH = 500
DEFAULT_MAX_CHARS = 20_000


def visible_text(
    log: EventLog,
    stream: str,
    *,
    leave_out_run: str | None = None,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> list[dict[str, Any]]:
    """The stream's visible text as goose ``Message``\\ s, oldest first, consecutive texts of one
    role in one message; the user's message of run `leave_out_run` left out (blocking: call it
    from a hook's thread)."""
    texts: OrderedDict[str, list[str]] = OrderedDict()  # key → [role, text]
    size = 0
    after = 0
    while True:
        batch = log.read(
            after, stream, READ_BATCH, types=(RUN_STARTED, GOOSE_MESSAGE), settled=False
        )
        for event in batch:
            found = _visible(event, leave_out_run)
            if found is None:
                continue
            key, role, text = found
            entry = texts.setdefault(key, [role, ""])
            entry[1] += text
            size += len(text)
            while size > max_chars and len(texts) > 1:
                size -= len(texts.popitem(last=False)[1][1])
        if len(batch) < READ_BATCH:
            break
        after = batch[-1].seq
    return _messages(list(texts.values()), max_chars)


def text_only_session(
    kind: str, log: EventLog | None, run: Any, instructions: str, drop_tools: tuple[str, ...]
) -> RecoveryPlan:
    """A recovery of `kind` in a clean goose session that starts from the conversation's
    visible text (not the failed run's own message: `instructions` carry the task), with the
    failed session's extensions less `drop_tools`."""
    context = [] if log is None else visible_text(log, run.stream, leave_out_run=run.run_id)
    return RecoveryPlan(
        kind,
        clean_session=True,
        context=context,
        instructions=instructions.format(message=run.message),
        drop_tools=drop_tools,
    )


def _visible(event: Event, leave_out_run: str | None) -> tuple[str, str, str] | None:
    """(key, role, text) of an event a reader saw as text, else None."""
    data, run_id = event.data, event.run_id
    if event.type == RUN_STARTED:
        message = data.get("message")
        if run_id == leave_out_run or not isinstance(message, str) or not message.strip():
            return None
        return f"run:{run_id}", "user", message
    message = data.get("message")
    if not isinstance(message, dict) or message.get("role") != "assistant":
        return None
    metadata = message.get("metadata")
    if isinstance(metadata, dict) and metadata.get("userVisible") is False:
        return None
    content = message.get("content")
    if not isinstance(content, list):
        return None
    text = "".join(
        item["text"]
        for item in content
        if isinstance(item, dict)
        and item.get("type") == "text"
        and isinstance(item.get("text"), str)
    )
    if not text:
        return None
    return f"message:{message.get('id') or event.seq}", "assistant", text


def _messages(texts: list[list[str]], max_chars: int) -> list[dict[str, Any]]:
    merged: list[list[str]] = []
    for role, text in texts:
        if merged and merged[-1][0] == role:
            merged[-1][1] += "\n\n" + text
        else:
            merged.append([role, text])
    if merged and len(merged[0][1]) > max_chars:  # one text longer than the whole budget
        merged[0][1] = merged[0][1][-max_chars:]
    created = int(time.time())
    return [
        {
            "role": role,
            "created": created,
            "content": [{"type": "text", "text": text}],
            "metadata": {"userVisible": True, "agentVisible": True},
        }
        for role, text in merged
        if text.strip()
    ]
