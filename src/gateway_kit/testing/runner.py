"""Run one scripted turn in the background, publishing what goose's reply task would publish."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable
from typing import TypeVar

from gateway_kit.types import JSONObject

from .bus import SessionBus
from .confirmations import (
    ALLOWING,
    DENYING,
    ELICITATION_SUBMIT_FAILED,
    SessionWaits,
    answered_within,
    elicitation_reply_text,
)
from .messages import elicitation_content, make_message, text_content
from .sessions import SessionRecord
from .turns import (
    AwaitConfirmation,
    Elicit,
    Fail,
    Pause,
    SendEvent,
    SendMessage,
    SendUsage,
    Sleep,
    Turn,
)

FINISH_REASON = "stop"  # goose's reason for every Finish, after a cancel or an error too

T = TypeVar("T")


async def _until(waiting: Awaitable[T], cancelled: asyncio.Event) -> T | None:
    """`waiting`'s result, or None if the request is cancelled first (`waiting` is then
    cancelled and has ended when this returns)."""
    wait_task = asyncio.ensure_future(waiting)
    cancel_task = asyncio.ensure_future(cancelled.wait())
    try:
        await asyncio.wait({wait_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        wait_task.cancel()
        cancel_task.cancel()
        await asyncio.gather(wait_task, cancel_task, return_exceptions=True)
    return None if wait_task.cancelled() else wait_task.result()


async def run_turn(
    turn: Turn,
    *,
    request_id: str,
    user_message: JSONObject,
    override_conversation: list[JSONObject] | None,
    session: SessionRecord,
    bus: SessionBus,
    cancelled: asyncio.Event,
    waits: SessionWaits,
) -> None:
    async def publish(event: JSONObject) -> None:
        bus.publish(request_id, event)
        await asyncio.sleep(0)  # goose's publishing awaits too: let subscribers run

    async def send(message: JSONObject, *, keep: bool = True) -> None:
        sent = {**message, "created": int(time.time())}
        if keep:
            session.add_message(sent)
        await publish({"type": "Message", "message": sent, "token_state": session.token_state()})

    try:
        if not turn.fails_early:
            # goose takes the history (or the client's override) and the new message first.
            if override_conversation is not None:
                session.replace_conversation(override_conversation)
            session.add_message(user_message)
        for step in turn.steps:
            if cancelled.is_set():
                break
            if isinstance(step, SendMessage):
                await send(step.message)
            elif isinstance(step, SendUsage):
                session.add_usage(step.input_tokens, step.output_tokens)
                usage = {
                    "inputTokens": step.input_tokens,
                    "outputTokens": step.output_tokens,
                    "totalTokens": step.input_tokens + step.output_tokens,
                }
                await publish(
                    {"type": "MessageUsage", "message_id": step.message_id, "usage": usage}
                )
            elif isinstance(step, SendEvent):
                if step.event["type"] == "UpdateConversation":
                    session.replace_conversation(step.event["conversation"])
                await publish(step.event)
            elif isinstance(step, Fail):
                await publish({"type": "Error", "error": step.error})
                if not step.finish:
                    return
                break
            elif isinstance(step, Sleep):
                await _until(asyncio.sleep(step.seconds), cancelled)
            elif isinstance(step, Pause):
                if step.reached is not None:
                    step.reached.set()
                await _until(step.release.wait(), cancelled)
            elif isinstance(step, AwaitConfirmation):
                with waits.expecting(step.tool_id):
                    await send(step.request, keep=False)  # goose keeps no confirmation request
                    action = await _until(waits.confirmation(step.tool_id), cancelled)
                if cancelled.is_set() or action not in ALLOWING | DENYING:
                    break  # a cancel, of the reply or as the user's action, ends the turn
                await send(step.allowed if action in ALLOWING else step.declined)
            elif isinstance(step, Elicit):
                elicitation_id = str(uuid.uuid4())
                content = elicitation_content(elicitation_id, step.message, step.requested_schema)
                with waits.elicitation(elicitation_id) as asked:
                    await send(make_message("assistant", [content]), keep=False)
                    answer = await _until(answered_within(asked, step.timeout), cancelled)
                if cancelled.is_set():
                    break
                text = elicitation_reply_text(answer, step.answer_text)
                await send(make_message("assistant", [text_content(text)]))
        if turn.finish_release is not None:
            await turn.finish_release.wait()
        await publish(
            {"type": "Finish", "reason": FINISH_REASON, "token_state": session.token_state()}
        )
    finally:
        bus.finish(request_id)


async def finish_elicitation_answer(
    *, request_id: str, error: str | None, session: SessionRecord, bus: SessionBus
) -> None:
    """What goose's task for a reply answering an elicitation publishes: the error if the answer
    reached nobody, then `Finish`, as every reply task ends."""
    if error is not None:
        text = text_content(ELICITATION_SUBMIT_FAILED.format(error))
        sent = {**make_message("assistant", [text]), "created": int(time.time())}
        event = {"type": "Message", "message": sent, "token_state": session.token_state()}
        bus.publish(request_id, event)
        await asyncio.sleep(0)
    finish = {"type": "Finish", "reason": FINISH_REASON, "token_state": session.token_state()}
    bus.publish(request_id, finish)
