"""goose's approve mode as the fake keeps it: tool confirmations and elicitations, per session.

goose keeps one confirmation channel per agent (one per session here). `POST
/action-required/tool-confirmation` puts `(id, action)` into it whatever the id and answers `{}`;
a turn waiting for one tool's confirmation takes them in order and drops those for other ids, so
a confirmation sent before anybody waits is kept for the next waiter only if the ids match.
An elicitation waits for its own id, up to its timeout; a `reply` whose message carries an
`elicitationResponse` answers it. All of it lives in goosed's memory: a restart loses it.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from gateway_kit.types import JSONObject

from .wire import BAD_BODY, Reject, require

PERMISSIONS = ("always_allow", "allow_once", "cancel", "deny_once", "always_deny")
ALLOWING = frozenset({"always_allow", "allow_once"})
DENYING = frozenset({"deny_once", "always_deny"})
PRINCIPAL_TYPES = ("Extension", "Tool")
# The tool result goose gives the model when the user declines a tool call.
DECLINED_RESPONSE = (
    "The user has declined to run this tool. DO NOT attempt to call this tool again. If there are "
    "no alternative methods to proceed, clearly explain the situation and STOP."
)
ELICITATION_TIMEOUT = 300.0  # seconds goose waits for an elicitation's answer
ELICITATION_ACTIONS = ("accept", "decline", "cancel")
# goose's errors for an answer nobody waits for, and the text its reply task sends then.
ELICITATION_NOT_FOUND = "Request not found: {}"
ELICITATION_COMPLETED = "Request already completed: {}"
ELICITATION_OTHER_SESSION = "Request {} belongs to session {}, not {}"
ELICITATION_SUBMIT_FAILED = "Failed to submit elicitation response: {}"
# What a scripted turn says after its elicitation, when no `answer_text` was given.
ELICITATION_THANKS = "Thanks: {}"
ELICITATION_REFUSED_TEXT = "No answer: the user chose to {} the request."
ELICITATION_TIMEOUT_TEXT = "No answer came in time: going on without it."


@dataclass(frozen=True)
class ElicitationAnswer:
    """What an `elicitationResponse` carried: the user's action and data."""

    action: str  # accept, decline or cancel
    user_data: Any


def elicitation_reply_text(answer: ElicitationAnswer | None, answer_text: str | None) -> str:
    """What a scripted turn says once its elicitation was answered, refused or timed out."""
    if answer is None:
        return ELICITATION_TIMEOUT_TEXT
    if answer.action != "accept":
        return ELICITATION_REFUSED_TEXT.format(answer.action)
    if answer_text is not None:
        return answer_text
    return ELICITATION_THANKS.format(json.dumps(answer.user_data, ensure_ascii=False))


def read_confirmation(body: JSONObject) -> tuple[str, str, str]:
    """`(session_id, id, action)` of a `ConfirmToolActionRequest`; a 422 if goose can't read it."""
    session_id = require(body, "sessionId", str)
    tool_id = require(body, "id", str)
    action = require(body, "action", str)
    if action not in PERMISSIONS:
        raise Reject(422, BAD_BODY.format(f"`action` must be one of {', '.join(PERMISSIONS)}"))
    principal = body.get("principalType")
    if principal is not None and principal not in PRINCIPAL_TYPES:
        raise Reject(422, BAD_BODY.format("`principalType` must be Extension or Tool"))
    return session_id, tool_id, action


def read_elicitation_answer(user_message: JSONObject) -> tuple[str, ElicitationAnswer] | None:
    """The elicitation id and answer a reply's message carries, None if it carries none."""
    for item in user_message["content"]:
        if not isinstance(item, dict) or item.get("type") != "actionRequired":
            continue
        data = item.get("data")
        if not isinstance(data, dict) or data.get("actionType") != "elicitationResponse":
            continue
        elicitation_id = require(data, "id", str)
        if "user_data" not in data:
            raise Reject(422, BAD_BODY.format("`user_data` is missing"))
        action = data.get("action", "accept")
        if not isinstance(action, str):
            raise Reject(422, BAD_BODY.format("`action` must be a str"))
        # The fake reads "decline" and "cancel" as refusals; any other action, or none, accepts.
        action = action if action in ELICITATION_ACTIONS else "accept"
        return elicitation_id, ElicitationAnswer(action, data["user_data"])
    return None


async def answered_within(
    answer: asyncio.Future[ElicitationAnswer], timeout: float
) -> ElicitationAnswer | None:
    """The answer, or None once `timeout` seconds passed without one."""
    done, _ = await asyncio.wait({answer}, timeout=timeout)
    return answer.result() if done else None


class SessionWaits:
    """What one session's turns wait for: its confirmation channel and open elicitations."""

    def __init__(self) -> None:
        self._confirmations: deque[tuple[str, str]] = deque()
        self._arrived = asyncio.Event()
        self._tool_ids: list[str] = []  # tool requests waiting for a confirmation
        self._elicitations: dict[str, asyncio.Future[ElicitationAnswer]] = {}

    def confirm(self, tool_id: str, action: str) -> None:
        self._confirmations.append((tool_id, action))
        self._arrived.set()

    @contextmanager
    def expecting(self, tool_id: str) -> Iterator[None]:
        """List the tool request as waited for (from before its request is sent) in the block."""
        self._tool_ids.append(tool_id)
        try:
            yield
        finally:
            self._tool_ids.remove(tool_id)

    async def confirmation(self, tool_id: str) -> str:
        """The action of the next confirmation for `tool_id`; those for other ids are dropped."""
        while True:
            while self._confirmations:
                confirmed_id, action = self._confirmations.popleft()
                if confirmed_id == tool_id:
                    return action
            self._arrived.clear()
            await self._arrived.wait()

    @contextmanager
    def elicitation(self, elicitation_id: str) -> Iterator[asyncio.Future[ElicitationAnswer]]:
        """The future of the elicitation's answer, open to `answer` in the block."""
        answer: asyncio.Future[ElicitationAnswer] = asyncio.get_running_loop().create_future()
        self._elicitations[elicitation_id] = answer
        try:
            yield answer
        finally:
            del self._elicitations[elicitation_id]
            answer.cancel()

    def answer(self, elicitation_id: str, answer: ElicitationAnswer) -> str | None:
        """Hand the answer to the elicitation waiting for it; goose's error if none does."""
        waiting = self._elicitations.get(elicitation_id)
        if waiting is None:
            return ELICITATION_NOT_FOUND.format(elicitation_id)
        if waiting.done():
            return ELICITATION_COMPLETED.format(elicitation_id)
        waiting.set_result(answer)
        return None

    def awaits_elicitation(self, elicitation_id: str) -> bool:
        return elicitation_id in self._elicitations

    def pending(self) -> list[str]:
        """The tool request ids, then the elicitation ids, waited for now."""
        return [*self._tool_ids, *self._elicitations]
