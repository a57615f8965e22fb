"""Whether a response of an AI agent reached its end, and why, read from its bytes in passing.

`ResponseReader` looks at each body chunk as it goes by and keeps what it learnt: the chunks
themselves are neither changed nor held. It knows these wire formats:

- OpenAI chat completions: a stream's first `choices[].finish_reason` that is not null (the
  end), `data: [DONE]` (the end); a JSON body's `choices[0].finish_reason`.
- OpenAI Responses: `response.completed` ("stop", or "tool_calls" when its output holds a
  `function_call`), `response.incomplete` ("length" unless it says otherwise),
  `response.failed` and `error` (an error); a JSON body's `status` alike.
- Anthropic Messages: `message_delta`'s `delta.stop_reason` (the reason), `message_stop` (the
  end), `event: error` (an error); a JSON body's top-level `stop_reason`.
- goose's events: `{"type":"Finish","reason":...}` (the end), `{"type":"Error",...}` (an error).
- Error bodies: `{"error": {...}}` or `{"type":"error",...}`.

An error ends the response too. Anything else (HTML, plain text, other JSON, a compressed
body) tells nothing, and no bytes raise. Reasons are normalized to "stop", "tool_calls" and
"length" where the upstream's word means one of them; other words pass through as they are.

Held at most: for a stream, `max_line_bytes` (an unfinished line plus the data lines of the
event being read; a longer line is dropped to its end and its event ignored, so an event
larger than that, such as a long answer's `response.completed`, tells nothing); for a JSON
body, `max_json_bytes` (a longer body stops being held and tells nothing).

In a stream only events with a line that can matter are parsed, found by a few regex
searches per chunk (`MARKS`). They assume keys and type names are written plainly, as every
server writes them (a key spelled with `\\u` escapes is not seen).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from gateway_kit.execution.sse_scan import SSEScanner

MAX_LINE_BYTES = 64 * 1024
MAX_JSON_BYTES = 1024 * 1024

# What a line of an event that can end a response holds. None of these can span a line end
# (the scanner relies on it): JSON whitespace inside a line is only spaces and tabs. Each
# starts with a literal, which the regex engine looks for at memory speed; one alternation of
# them all is twenty times slower.
MARKS = tuple(
    re.compile(pattern)
    for pattern in (
        rb'_reason"[ \t]*:[ \t]*"',  # finish_reason or stop_reason, not null
        rb'"type"[ \t]*:[ \t]*"(?:Finish|Error|error|message_stop'
        rb'|response\.(?:completed|incomplete|failed))"',
        rb'"error"[ \t]*:',
        rb"\[DONE\]",
        rb"event:[ \t]?(?:error|message_stop)",
    )
)

NORMAL_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",  # OpenAI's name before tools
    "max_tokens": "length",
    "max_output_tokens": "length",
}


def normal_reason(word: str) -> str:
    return NORMAL_REASONS.get(word, word)


def media_type(content_type: str | None) -> str:
    return (content_type or "").partition(";")[0].strip().lower()


class ResponseReader:
    """Reads one response's body as it passes: whether it ended, why, and whether it failed."""

    def __init__(
        self,
        content_type: str | None,
        *,
        content_encoding: str | None = None,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_json_bytes: int = MAX_JSON_BYTES,
    ) -> None:
        self.terminal = False  # its end event was seen, or its JSON body was understood whole
        self.finish_reason: str | None = None
        self.error = False
        kind = media_type(content_type)
        # Compressed bytes say nothing until decompressed, which an observer will not do.
        readable = media_type(content_encoding) in ("", "identity")
        self.streaming = readable and kind == "text/event-stream"
        self._scanner = SSEScanner(MARKS, max_line_bytes) if self.streaming else None
        self._json = readable and (kind == "application/json" or kind.endswith("+json"))
        self._max_json = max_json_bytes
        self._body = bytearray()
        self._done = not (self.streaming or self._json)  # nothing more to learn

    @classmethod
    def for_headers(
        cls,
        headers: Iterable[tuple[bytes, bytes]],
        *,
        max_line_bytes: int = MAX_LINE_BYTES,
        max_json_bytes: int = MAX_JSON_BYTES,
    ) -> ResponseReader:
        """A reader for the body of an ASGI `http.response.start` with these headers."""
        found: dict[bytes, str] = {}
        for name, value in headers:
            found.setdefault(name.lower(), value.decode("latin-1"))
        return cls(
            found.get(b"content-type"),
            content_encoding=found.get(b"content-encoding"),
            max_line_bytes=max_line_bytes,
            max_json_bytes=max_json_bytes,
        )

    @property
    def buffered(self) -> int:
        """Bytes of the body held now: at most `max_line_bytes` or `max_json_bytes`."""
        if self._scanner is not None:
            return self._scanner.buffered
        return len(self._body)

    def feed(self, chunk: bytes) -> None:
        """Read the next chunk of the body."""
        if self._done:
            return
        if self._scanner is not None:
            for event in self._scanner.feed(chunk):
                self._take_event(event.name, event.data)
                if self._done:
                    self._scanner = None  # what it holds is of no use any more
                    return
        elif len(self._body) + len(chunk) > self._max_json:
            self._body = bytearray()
            self._done = True
        else:
            self._body += chunk

    def end(self) -> None:
        """The body is complete (its last `http.response.body` had `more_body` false)."""
        if self._json and not self._done:
            self._take_body(self._load(bytes(self._body)))
        self._body = bytearray()
        self._scanner = None
        self._done = True

    def _take_event(self, name: bytes, data: bytes) -> None:
        if name.strip() == b"error":
            return self._fail()
        if name.strip() == b"message_stop" or data.strip() == b"[DONE]":
            return self._finish()
        event = self._load(data)
        kind = event.get("type")
        if kind == "Finish":  # goose
            return self._finish(event.get("reason"))
        if kind in ("Error", "error", "response.failed") or event.get("error"):
            return self._fail()
        if kind == "message_stop":
            return self._finish()
        if kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, dict):
                self._reason(delta.get("stop_reason"))
            return None
        if kind in ("response.completed", "response.incomplete"):
            response = event.get("response")
            return self._take_response(
                response if isinstance(response, dict) else {}, kind.removeprefix("response.")
            )
        choices = event.get("choices")
        if isinstance(choices, list):
            for choice in choices:
                if isinstance(choice, dict) and isinstance(choice.get("finish_reason"), str):
                    return self._finish(choice["finish_reason"])
        return None

    def _take_body(self, body: dict[str, Any]) -> None:
        if body.get("type") == "error" or body.get("error"):
            return self._fail()
        if body.get("type") == "message" and "stop_reason" in body:  # Anthropic
            return self._finish(body["stop_reason"])
        choices = body.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            return self._finish(choices[0].get("finish_reason"))
        if body.get("object") == "response":
            return self._take_response(body, None)
        return None

    def _take_response(self, response: dict[str, Any], event_status: str | None) -> None:
        """An OpenAI Responses object: its status (else its event's), and what its output asks
        for."""
        status = response.get("status") or event_status
        if status == "failed":
            return self._fail()
        if status == "incomplete":
            details = response.get("incomplete_details")
            reason = details.get("reason") if isinstance(details, dict) else None
            return self._finish(reason if isinstance(reason, str) else "length")
        if status == "completed":
            output = response.get("output")
            items = output if isinstance(output, list) else []
            calls = any(isinstance(i, dict) and i.get("type") == "function_call" for i in items)
            return self._finish("tool_calls" if calls else "stop")
        return None

    def _load(self, data: bytes) -> dict[str, Any]:
        """The JSON object `data` holds, or {} (not JSON, not UTF-8, not an object)."""
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}

    def _reason(self, word: object) -> None:
        if self.finish_reason is None and isinstance(word, str):
            self.finish_reason = normal_reason(word)

    def _finish(self, word: object = None) -> None:
        self._reason(word)
        self.terminal = self._done = True

    def _fail(self) -> None:
        self.error = True
        self._finish()
