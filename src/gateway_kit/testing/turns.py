"""Scripted turns: what the fake goose does for one `reply`.

A `Turn` is an immutable list of steps; every builder method returns a new `Turn`. Unless a step
says otherwise the turn ends the way goose's work loop ends, with `Finish` (reason `stop`).

Text is streamed the way goose streams it: every `Message` event of one reply text carries the
same `message.id` and one more chunk of the text; clients concatenate the chunks by id.

goose's approve mode has two steps: `confirm_tool` waits, without timeout, for the tool's
confirmation, and `elicit` waits up to its timeout for the user's data. The `actionRequired`
message each sends is not kept in the session's conversation, as in goose.
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from gateway_kit.types import JSONObject

from .confirmations import DECLINED_RESPONSE, ELICITATION_TIMEOUT
from .messages import (
    USER_ONLY,
    image_content,
    make_message,
    message_text,
    new_message_id,
    text_content,
    tool_confirmation_content,
    tool_request_content,
    tool_response_content,
)

# What a text-only model answers once an image is in the history (seen with DeepSeek).
TEXT_ONLY_MODEL_ERROR = "unknown variant `image_url`, expected `text`"
READ_IMAGE_TOOL = "read_image"
# A 1x1 transparent PNG: the smallest image `read_image` could return.
TINY_PNG_BASE64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC"
    "hwGA60e6kgAAAABJRU5ErkJggg=="
)


# --- steps


@dataclass(frozen=True)
class SendMessage:
    message: JSONObject


@dataclass(frozen=True)
class SendUsage:
    message_id: str | None
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class SendEvent:
    """Any other event (`Notification`, `UpdateConversation`), sent as given."""

    event: JSONObject


@dataclass(frozen=True)
class Fail:
    error: str
    finish: bool


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class Pause:
    release: asyncio.Event
    reached: asyncio.Event | None


@dataclass(frozen=True)
class AwaitConfirmation:
    """Ask for a tool call's confirmation (a message goose does not keep) and wait for it."""

    tool_id: str
    request: JSONObject  # the `actionRequired` message
    allowed: JSONObject  # the `toolResponse` message after an allow
    declined: JSONObject  # the one after a deny


@dataclass(frozen=True)
class Elicit:
    message: str
    requested_schema: JSONObject
    timeout: float
    answer_text: str | None


Step = SendMessage | SendUsage | SendEvent | Fail | Sleep | Pause | AwaitConfirmation | Elicit


@dataclass(frozen=True)
class Turn:
    """What one `reply` does, step by step; build it with the methods below."""

    steps: tuple[Step, ...] = ()
    finish_release: asyncio.Event | None = None

    def _then(self, *steps: Step) -> Turn:
        if self.steps and isinstance(self.steps[-1], Fail):
            raise ValueError("an error ends the turn: nothing can follow it")
        return dataclasses.replace(self, steps=self.steps + steps)

    def _last_message_id(self) -> str | None:
        for step in reversed(self.steps):
            if isinstance(step, SendMessage):
                return str(step.message["id"])
        return None

    def text(self, *chunks: str, message_id: str | None = None) -> Turn:
        """Stream an assistant text: one `Message` event per chunk, all with the same id."""
        if not chunks:
            raise ValueError("text() needs at least one chunk")
        shared_id = message_id or new_message_id()
        return self._then(
            *(
                SendMessage(make_message("assistant", [text_content(c)], message_id=shared_id))
                for c in chunks
            )
        )

    def message(self, goose_message: JSONObject) -> Turn:
        """Send one `Message` event carrying this goose `Message` (its `created` is filled in)."""
        return self._then(SendMessage({"id": new_message_id(), **goose_message}))

    def tool_call(
        self,
        name: str,
        arguments: JSONObject | None = None,
        *,
        result: str | Sequence[JSONObject] = "",
        is_error: bool = False,
        call_id: str | None = None,
    ) -> Turn:
        """An assistant `toolRequest`, then the user-role `toolResponse` goose adds."""
        call_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
        request = tool_request_content(call_id, name, arguments or {})
        content = [text_content(result)] if isinstance(result, str) else result
        response = tool_response_content(call_id, content, is_error=is_error)
        return self._then(
            SendMessage(make_message("assistant", [request])),
            SendMessage(make_message("user", [response])),
        )

    def confirm_tool(
        self,
        name: str,
        arguments: JSONObject | None = None,
        *,
        result: str | Sequence[JSONObject] = "",
        prompt: str | None = None,
        call_id: str | None = None,
        is_error: bool = False,
    ) -> Turn:
        """A tool call in goose's approve mode: the assistant `toolRequest`, then an
        `actionRequired`/`toolConfirmation` message (not kept in the session), then a wait,
        without timeout, for `POST /action-required/tool-confirmation` of that id.

        allow_once or always_allow: the `toolResponse` with `result`, as `tool_call` sends it.
        deny_once or always_deny: a `toolResponse` with goose's `DECLINED_RESPONSE`.
        cancel, or a cancel of the reply: the turn ends there, with `Finish`.
        """
        call_id = call_id or f"call_{uuid.uuid4().hex[:24]}"
        arguments = arguments or {}
        content = [text_content(result)] if isinstance(result, str) else result
        confirmation = tool_confirmation_content(call_id, name, arguments, prompt)
        allowed = tool_response_content(call_id, content, is_error=is_error)
        declined = tool_response_content(call_id, [text_content(DECLINED_RESPONSE)])
        return self._then(
            SendMessage(
                make_message("assistant", [tool_request_content(call_id, name, arguments)])
            ),
            AwaitConfirmation(
                call_id,
                make_message("assistant", [confirmation], metadata=USER_ONLY),
                make_message("user", [allowed]),
                make_message("user", [declined]),
            ),
        )

    def elicit(
        self,
        message: str,
        requested_schema: JSONObject | None = None,
        *,
        timeout: float = ELICITATION_TIMEOUT,
        answer_text: str | None = None,
    ) -> Turn:
        """An MCP elicitation: an `actionRequired`/`elicitation` message (not kept in the
        session) with a fresh id, then up to `timeout` seconds for a reply whose message holds
        the `elicitationResponse` of that id (`elicitation_response(...)`).

        Then an assistant text: `answer_text` (default `"Thanks: <user_data as JSON>"`) for an
        accepted answer, else a text saying the user refused or that no answer came in time.
        """
        schema = (
            {"type": "object", "properties": {}} if requested_schema is None else requested_schema
        )
        return self._then(Elicit(message, dict(schema), timeout, answer_text))

    def read_image(
        self,
        path: str = "screenshot.png",
        *,
        data: str = TINY_PNG_BASE64,
        mime_type: str = "image/png",
        tool_name: str = READ_IMAGE_TOOL,
    ) -> Turn:
        """A `read_image` tool call whose result is an image block."""
        return self.tool_call(tool_name, {"path": path}, result=[image_content(data, mime_type)])

    def usage(
        self, input_tokens: int, output_tokens: int, *, message_id: str | None = None
    ) -> Turn:
        """A `MessageUsage` event, for the last message of the turn unless told otherwise."""
        return self._then(
            SendUsage(message_id or self._last_message_id(), input_tokens, output_tokens)
        )

    def notification(self, mcp_request_id: str, notification: JSONObject) -> Turn:
        """An MCP `Notification`; its `request_id` is the tool call's, not the reply's."""
        event = {"type": "Notification", "request_id": mcp_request_id, "message": notification}
        return self._then(SendEvent(event))

    def update_conversation(self, conversation: Sequence[JSONObject]) -> Turn:
        """Replace the session's history (as goose does after compaction)."""
        return self._then(
            SendEvent(
                {"type": "UpdateConversation", "conversation": [dict(m) for m in conversation]}
            )
        )

    def error(self, text: str, *, finish: bool = True) -> Turn:
        """End the turn with an `Error` event.

        With `finish=True` the error came from the work loop and `Finish` follows, as in goose.
        With `finish=False` it is goose's early failure (no agent, no session): no `Finish`.
        """
        return self._then(Fail(text, finish))

    def delay(self, seconds: float) -> Turn:
        return self._then(Sleep(seconds))

    def pause(self, release: asyncio.Event, *, reached: asyncio.Event | None = None) -> Turn:
        """Stop here until `release` is set or the request is cancelled; set `reached` first."""
        return self._then(Pause(release, reached))

    def hang(self, *, reached: asyncio.Event | None = None) -> Turn:
        """Stop here until the request is cancelled or goose restarts."""
        return self.pause(asyncio.Event(), reached=reached)

    def hold_finish(self, release: asyncio.Event) -> Turn:
        """Send this turn's `Finish` only once `release` is set, even after a cancel.

        Models a cancelled task that winds down slowly: a new reply is already accepted while
        the old request's late events are still to come.
        """
        return dataclasses.replace(self, finish_release=release)

    @property
    def fails_early(self) -> bool:
        """True when the turn is goose's early failure: the agent never saw the message."""
        return bool(self.steps) and isinstance(self.steps[0], Fail) and not self.steps[0].finish


def echo_turn(user_message: JSONObject, *, chunk_delay: float = 0.0) -> Turn:
    """The default turn: stream the user's text back in a few chunks, then report usage.

    `chunk_delay` spaces the chunks out, e.g. `functools.partial(echo_turn, chunk_delay=0.2)`
    as `default_turn` for a demo that should look like a model typing.
    """
    text = message_text(user_message) or "(empty message)"
    words = text.split(" ")
    chunk_size = max(1, -(-len(words) // 3))  # about three chunks
    turn, message_id = Turn(), new_message_id()
    for start in range(0, len(words), chunk_size):
        last = start + chunk_size >= len(words)
        chunk = " ".join(words[start : start + chunk_size]) + ("" if last else " ")
        turn = turn.delay(chunk_delay) if chunk_delay and start else turn
        turn = turn.text(chunk, message_id=message_id)
    return turn.usage(input_tokens=len(words), output_tokens=len(words))
