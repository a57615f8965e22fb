"""What the fake ACP agent does for one prompt, written into the prompt's text.

The agent runs as a child process, so a test tells it what to do the only way it can reach
it: the prompt. ``AcpScript().text("Hel", "lo").tool("developer__shell", {"command": "ls"},
permission=True, result="a.txt").stop("max_tokens").prompt()`` is a prompt text that makes the
agent stream two chunks of one message, call a tool after asking permission, and end with
``max_tokens``. Any other prompt is echoed back in a few chunks (``echo_steps``).

A script is a list of steps, each a JSON object whose ``do`` names it; `AcpScript` builds them
and every builder method returns a new script.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

SCRIPT_MARKER = "#acp-script "
Step = dict[str, Any]


@dataclass(frozen=True)
class AcpScript:
    steps: tuple[Step, ...] = ()

    def _then(self, step: Step) -> AcpScript:
        return dataclasses.replace(self, steps=(*self.steps, step))

    def prompt(self) -> str:
        """The prompt text that makes the agent run this script."""
        return SCRIPT_MARKER + json.dumps({"steps": list(self.steps)})

    def text(self, *chunks: str, message_id: str | None = None) -> AcpScript:
        """Stream an agent message: one ``agent_message_chunk`` per chunk, one message id."""
        return self._then({"do": "text", "chunks": list(chunks), "message_id": message_id})

    def thought(self, *chunks: str) -> AcpScript:
        return self._then({"do": "thought", "chunks": list(chunks)})

    def big_text(self, size: int) -> AcpScript:
        """One agent message chunk of `size` characters (a line that long on the wire)."""
        return self._then({"do": "big_text", "bytes": size})

    def tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        title: str | None = None,
        kind: str = "execute",
        permission: bool = False,
        result: str = "",
        fail: bool = False,
        progress: bool = False,
        tool_call_id: str | None = None,
    ) -> AcpScript:
        """A tool call as goose makes one: ``tool_call`` (pending, the name under
        ``_meta.goose.toolCall.toolName``), with `progress` an ``in_progress`` update, then,
        with `permission` and a session mode other than ``auto``, ``session/request_permission``
        with goose's four options; then ``completed`` with `result` (``failed`` with `fail`), or
        ``failed`` with goose's text for a rejection. A ``cancelled`` answer ends the turn."""
        return self._then(
            {
                "do": "tool",
                "name": name,
                "arguments": dict(arguments or {}),
                "title": title,
                "kind": kind,
                "permission": permission,
                "result": result,
                "fail": fail,
                "progress": progress,
                "id": tool_call_id,
            }
        )

    def update(self, update: Mapping[str, Any]) -> AcpScript:
        """Send this ``session/update`` as it is, whatever its kind or shape."""
        return self._then({"do": "update", "update": dict(update)})

    def sleep(self, seconds: float) -> AcpScript:
        """Wait; a cancel ends the wait and the turn."""
        return self._then({"do": "sleep", "seconds": seconds})

    def hang(self) -> AcpScript:
        """Wait for a cancel."""
        return self._then({"do": "hang"})

    def ignore_cancel(self) -> AcpScript:
        """Wait for ever: a cancel is not answered."""
        return self._then({"do": "ignore_cancel"})

    def end_turn_on_cancel(self) -> AcpScript:
        """Answer a cancelled turn ``end_turn``, as goose up to 1.48 did."""
        return self._then({"do": "end_turn_on_cancel"})

    def crash(self, code: int = 3) -> AcpScript:
        """Exit at once with `code`, the prompt unanswered."""
        return self._then({"do": "crash", "code": code})

    def error(
        self, message: str = "Internal error", *, code: int = -32603, data: Any = None
    ) -> AcpScript:
        """Answer the prompt with this JSON-RPC error (goose's failures are -32603 with a
        string `data`)."""
        return self._then({"do": "error", "code": code, "message": message, "data": data})

    def stderr(self, size: int, *, line: int = 1000) -> AcpScript:
        """Write `size` bytes to stderr, in lines of `line` bytes."""
        return self._then({"do": "stderr", "bytes": size, "line": line})

    def stdout(self, text: str) -> AcpScript:
        """Write `text` to stdout as it is (over stdio only): not JSON-RPC."""
        return self._then({"do": "stdout", "text": text})

    def usage(self, input_tokens: int, output_tokens: int) -> AcpScript:
        """Report this usage in the prompt's answer."""
        return self._then({"do": "usage", "input": input_tokens, "output": output_tokens})

    def stop(self, reason: str) -> AcpScript:
        """End the turn here with this stop reason (``end_turn`` when the steps run out)."""
        return self._then({"do": "stop", "reason": reason})


def parse_prompt(text: str) -> list[Step] | None:
    """The script a prompt text holds, or None for an ordinary prompt."""
    if not text.startswith(SCRIPT_MARKER):
        return None
    loaded = json.loads(text[len(SCRIPT_MARKER) :])
    steps = loaded.get("steps") if isinstance(loaded, dict) else None
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        raise ValueError("a script holds {'steps': [objects]}")
    return steps


def echo_steps(text: str) -> list[Step]:
    """What an ordinary prompt gets: its text back, in about three chunks of one message."""
    words = (text or "(empty prompt)").split(" ")
    size = max(1, -(-len(words) // 3))
    chunks = [
        " ".join(words[start : start + size]) + ("" if start + size >= len(words) else " ")
        for start in range(0, len(words), size)
    ]
    return [{"do": "text", "chunks": chunks}, {"do": "usage", "input": len(words), "output": 3}]
