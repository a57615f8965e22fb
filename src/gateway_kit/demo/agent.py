"""The fake agent turn the example app runs in a background thread for each task.

It writes goose's event names, because those are what the log will hold once runs go through
goose: `Message` events (an assistant reply streams as many events sharing one `message_id`,
one chunk of text each), then `Finish`, or `Error` when the turn fails. A message starting with
``/fail`` makes the turn fail, to show what a failed task looks like.
"""

from __future__ import annotations

import logging
import time
import uuid

from ..exceptions import LogClosed
from ..log.event import ERROR, FINISH
from .tasks import EventWriter

logger = logging.getLogger("gateway_kit.demo")

REPLY = (
    "You said: {message} — I am a fake agent. My reply streams in chunks, one event each, "
    "and ends with Finish."
)
FAIL_COMMAND = "/fail"
FAILURE = "the fake agent was asked to fail"


def new_message_id() -> str:
    return f"msg_{uuid.uuid4().hex}"


def reply_chunks(message: str) -> list[str]:
    """The reply to `message`, cut into the chunks it streams as (word by word)."""
    words = REPLY.format(message=message).split(" ")
    return [word + " " for word in words[:-1]] + words[-1:]


def run_turn(write: EventWriter, message: str, *, chunk_delay: float = 0.0) -> None:
    """Stream a reply to `message` through `write`; never raises."""
    message_id = new_message_id()
    try:
        for chunk in reply_chunks(message):
            if chunk_delay:
                time.sleep(chunk_delay)  # so that a person watching sees it arrive
            write("Message", {"role": "assistant", "message_id": message_id, "text": chunk})
            if message.startswith(FAIL_COMMAND):
                write(ERROR, {"error": FAILURE})
                return
        write(FINISH, {"reason": "stop"})
    except LogClosed:
        logger.info("a fake agent turn stopped: the event log was closed (the server is stopping)")
    except Exception as exc:
        logger.exception("a fake agent turn failed")
        try:
            write(ERROR, {"error": str(exc)})
        except Exception:  # the store itself is failing; the thread has nowhere left to say it
            logger.exception("could not record the failure of a fake agent turn")
