"""Reading the fake goose's SSE stream frame by frame, as a gateway would."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from gateway_kit.testing import user_message

FAST_PINGS = 0.01


@dataclass(frozen=True)
class Frame:
    """One SSE frame exactly as received: its lines, split into fields."""

    lines: tuple[str, ...]

    def field(self, name: str) -> str | None:
        prefix = f"{name}: "
        return next((line[len(prefix) :] for line in self.lines if line.startswith(prefix)), None)

    @property
    def id(self) -> str | None:
        return self.field("id")

    @property
    def data(self) -> dict[str, Any]:
        raw = self.field("data")
        assert raw is not None, f"not an event frame: {self.lines}"
        value: dict[str, Any] = json.loads(raw)
        return value

    @property
    def is_comment(self) -> bool:
        return all(line.startswith(":") for line in self.lines)

    @property
    def type(self) -> str:
        return str(self.data["type"])


class FrameReader:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._chunks = response.aiter_text()
        self._buffer = ""

    async def next_frame(self) -> Frame | None:
        """The next frame, comments included; None once the stream has ended."""
        while "\n\n" not in self._buffer:
            try:
                self._buffer += await anext(self._chunks)
            except StopAsyncIteration:
                assert self._buffer == "", f"stream ended inside a frame: {self._buffer!r}"
                return None
        block, self._buffer = self._buffer.split("\n\n", 1)
        return Frame(tuple(block.split("\n")))

    async def next_event(self) -> Frame | None:
        """The next frame that is not a comment."""
        while (frame := await self.next_frame()) is not None:
            if not frame.is_comment:
                return frame
        return None

    async def events_until(self, last_type: str) -> list[Frame]:
        """Events up to and including the first of type `last_type`."""
        frames: list[Frame] = []
        while True:
            frame = await self.next_event()
            assert frame is not None, f"stream ended before {last_type}: {frames}"
            frames.append(frame)
            if frame.type == last_type:
                return frames

    async def remaining_frames(self) -> list[Frame]:
        """Every remaining frame, comments included, until the stream ends."""
        frames: list[Frame] = []
        while (frame := await self.next_frame()) is not None:
            frames.append(frame)
        return frames

    async def rest(self) -> list[Frame]:
        """Every remaining event until the stream ends."""
        frames: list[Frame] = []
        while (frame := await self.next_event()) is not None:
            frames.append(frame)
        return frames


@asynccontextmanager
async def open_events(
    client: httpx.AsyncClient, session_id: str, last_event_id: str | None = None
) -> AsyncIterator[FrameReader]:
    headers = {} if last_event_id is None else {"Last-Event-ID": last_event_id}
    async with client.stream("GET", f"/sessions/{session_id}/events", headers=headers) as response:
        assert response.status_code == 200, response.status_code
        assert response.headers["content-type"] == "text/event-stream"
        yield FrameReader(response)


async def reply(
    client: httpx.AsyncClient, session_id: str, text: str = "hello", request_id: str | None = None
) -> httpx.Response:
    body = {"request_id": request_id or str(uuid.uuid4()), "user_message": user_message(text)}
    return await client.post(f"/sessions/{session_id}/reply", json=body)


async def start_reply(client: httpx.AsyncClient, session_id: str, text: str = "hello") -> str:
    """Post a reply that must be accepted; its request id."""
    response = await reply(client, session_id, text)
    assert response.status_code == 200, response.text
    return str(response.json()["request_id"])
