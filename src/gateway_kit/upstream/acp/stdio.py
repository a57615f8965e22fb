"""JSON-RPC over an agent's stdin and stdout: one JSON object per line.

Deliberate deviation from the SDK's own stdio framing, which logs a line that is not JSON and
reads on: here such a line, a JSON value that is not an object, or a line longer than
`max_message_bytes` is a broken protocol. The transport records what it saw (`violation`) and
ends as if the agent had closed its stdout, so that every request waiting for an answer fails
at once with that reason instead of waiting for an answer that will never come.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import orjson

MAX_QUOTED_CHARS = 200
NOT_JSON = "the agent wrote a line that is not JSON-RPC on its stdout: {line!r}"
NOT_OBJECT = "the agent wrote a JSON value that is not a JSON-RPC message on its stdout: {line!r}"
TOO_LONG = "the agent wrote a line of more than {limit} bytes on its stdout"
STDIN_CLOSED = "the agent's stdin is closed: {error}"


class LineTooLong(Exception):
    pass


async def read_line(reader: asyncio.StreamReader, limit: int, *, cut: bool = False) -> bytes:
    """The next line (its newline kept), b"" at the end of the stream.

    A line longer than `limit` raises `LineTooLong`, or with `cut` is cut to `limit` bytes
    (the rest of it read and dropped).
    """
    chunks: list[bytes] = []
    size = 0
    while True:
        try:
            chunk = await reader.readuntil(b"\n")
        except asyncio.LimitOverrunError as exc:
            chunk = await reader.readexactly(exc.consumed)
            done = False
        except asyncio.IncompleteReadError as exc:
            chunk, done = exc.partial, True
        else:
            done = True
        size += len(chunk)
        if size > limit:
            if not cut:
                raise LineTooLong(limit)
            kept = limit - (size - len(chunk))
            if kept > 0:
                chunks.append(chunk[:kept])
            if not done:
                await _drop_rest(reader)
            return b"".join(chunks)
        chunks.append(chunk)
        if done:
            return b"".join(chunks)


async def _drop_rest(reader: asyncio.StreamReader) -> None:
    while True:
        try:
            await reader.readuntil(b"\n")
            return
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return


def decode(line: bytes) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    try:  # what orjson refuses and the standard library takes (NaN, lone surrogates)
        return json.loads(line)
    except ValueError as exc:
        raise ValueError(NOT_JSON.format(line=quoted(line))) from exc


def encode(message: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(message) + b"\n"
    except TypeError:  # a value orjson does not take (an integer above 64 bits)
        return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def quoted(line: bytes) -> str:
    return line[:MAX_QUOTED_CHARS].decode("utf-8", "replace").strip()


class StdioTransport:
    """The SDK's message `Transport` over a child's stdout (`reader`) and stdin (`writer`)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        *,
        max_message_bytes: int,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._limit = max_message_bytes
        self._ended = False
        self.violation: str | None = None

    async def send(self, message: dict[str, Any]) -> None:
        try:
            self._writer.write(encode(message))
            await self._writer.drain()
        except (ConnectionError, RuntimeError) as exc:  # RuntimeError: the pipe is closed
            raise ConnectionError(STDIN_CLOSED.format(error=exc)) from exc

    async def receive(self) -> dict[str, Any] | None:
        while not self._ended:
            try:
                line = await read_line(self._reader, self._limit)
            except LineTooLong:
                self._broken(TOO_LONG.format(limit=self._limit))
                break
            if not line:
                self._ended = True
                return None
            if not line.strip():
                continue
            try:
                message = decode(line)
            except ValueError as exc:
                self._broken(str(exc))
                break
            if not isinstance(message, dict):
                self._broken(NOT_OBJECT.format(line=quoted(line)))
                break
            return message
        return None

    def _broken(self, violation: str) -> None:
        self.violation = violation
        self._ended = True

    async def close(self) -> None:
        if not self._writer.is_closing():
            self._writer.close()
