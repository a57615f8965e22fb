"""Run one scripted turn in the background, publishing what goose's reply task would publish."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable

from gateway_kit.types import JSONObject

from .bus import SessionBus
from .sessions import SessionRecord
from .turns import Fail, Pause, SendEvent, SendMessage, SendUsage, Sleep, Turn

FINISH_REASON = "stop"  # goose's reason for every Finish, after a cancel or an error too


async def _until(waiting: Awaitable[object], cancelled: asyncio.Event) -> None:
    """Wait for `waiting`, or less if the request is cancelled meanwhile."""
    wait_task = asyncio.ensure_future(waiting)
    cancel_task = asyncio.ensure_future(cancelled.wait())
    try:
        await asyncio.wait({wait_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        wait_task.cancel()
        cancel_task.cancel()


async def run_turn(
    turn: Turn,
    *,
    request_id: str,
    user_message: JSONObject,
    override_conversation: list[JSONObject] | None,
    session: SessionRecord,
    bus: SessionBus,
    cancelled: asyncio.Event,
) -> None:
    async def publish(event: JSONObject) -> None:
        bus.publish(request_id, event)
        await asyncio.sleep(0)  # goose's publishing awaits too: let subscribers run

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
                sent = {**step.message, "created": int(time.time())}
                session.add_message(sent)
                await publish(
                    {"type": "Message", "message": sent, "token_state": session.token_state()}
                )
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
        if turn.finish_release is not None:
            await turn.finish_release.wait()
        await publish(
            {"type": "Finish", "reason": FINISH_REASON, "token_state": session.token_state()}
        )
    finally:
        bus.finish(request_id)
