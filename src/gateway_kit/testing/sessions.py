"""What goose keeps on disk for a session: its history and token counts. Survives restarts."""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime

from gateway_kit.types import JSONObject

DEFAULT_WORKING_DIR = "/tmp"
SESSION_NAME = "fake goose session"

_session_numbers = itertools.count(1)


def _now() -> str:
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def new_session_id() -> str:
    """An id shaped like goose's own: `YYYYMMDD_N`."""
    return f"{datetime.now(UTC):%Y%m%d}_{next(_session_numbers)}"


@dataclass
class SessionRecord:
    id: str
    working_dir: str = DEFAULT_WORKING_DIR
    name: str = SESSION_NAME
    conversation: list[JSONObject] = field(default_factory=list)
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    input_tokens: int = 0
    output_tokens: int = 0
    accumulated_input_tokens: int = 0
    accumulated_output_tokens: int = 0
    extensions: list[JSONObject] = field(default_factory=list)  # as `/agent/start` got them

    def add_message(self, message: JSONObject) -> None:
        """Keep a streamed message the way goose stores it: chunks of one id merged into one."""
        self.updated_at = _now()
        last = self.conversation[-1] if self.conversation else None
        if last is None or last.get("id") is None or last.get("id") != message.get("id"):
            self.conversation.append(copy.deepcopy(message))
            return
        incoming = message["content"]
        if (
            len(incoming) == 1
            and incoming[0].get("type") == "text"
            and last["content"]
            and last["content"][-1].get("type") == "text"
        ):
            last["content"][-1]["text"] += incoming[0]["text"]
        else:
            last["content"].extend(copy.deepcopy(incoming))

    def replace_conversation(self, conversation: list[JSONObject]) -> None:
        self.updated_at = _now()
        self.conversation = copy.deepcopy(conversation)

    def add_usage(self, input_tokens: int, output_tokens: int) -> None:
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.accumulated_input_tokens += input_tokens
        self.accumulated_output_tokens += output_tokens

    def token_state(self) -> JSONObject:
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "totalTokens": self.input_tokens + self.output_tokens,
            "accumulatedInputTokens": self.accumulated_input_tokens,
            "accumulatedOutputTokens": self.accumulated_output_tokens,
            "accumulatedTotalTokens": self.accumulated_input_tokens
            + self.accumulated_output_tokens,
        }

    def to_json(self, *, with_conversation: bool = True) -> JSONObject:
        """The session as goose's `Session` schema describes it."""
        total = self.accumulated_input_tokens + self.accumulated_output_tokens
        session: JSONObject = {
            "id": self.id,
            "name": self.name,
            "user_set_name": False,
            "session_type": "user",
            "working_dir": self.working_dir,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "extension_data": {},
            "message_count": len(self.conversation),
            "accumulated_usage": {
                "input_tokens": self.accumulated_input_tokens,
                "output_tokens": self.accumulated_output_tokens,
                "total_tokens": total,
            },
        }
        if with_conversation:
            session["conversation"] = copy.deepcopy(self.conversation)
        return session
