"""A hand-written ASGI client for responses that may never end (SSE).

`httpx.ASGITransport` buffers the whole response, so an endless stream hangs there. This driver
runs one request as a task, records what the app sends, and lets a test read frames as they
come, disconnect, or stop reading (its `send` then blocks, like a client whose socket is full).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlencode

from gateway_kit.types import ASGIApp, Message

WAIT = 10.0  # seconds a test waits for something that should happen at once


@dataclass
class Frame:
    id: str | None
    data: str | None
    comment: bool = False

    @property
    def envelope(self) -> dict[str, Any]:
        assert self.data is not None
        value: dict[str, Any] = json.loads(self.data)
        return value


def parse_frames(body: bytes) -> list[Frame]:
    frames = []
    for block in body.decode().split("\n\n")[:-1]:
        fields: dict[str, str] = {}
        comment = False
        for line in block.split("\n"):
            if line.startswith(":"):
                comment = True
                continue
            name, _, value = line.partition(": ")
            assert name not in fields, f"field {name!r} twice in one frame: {block!r}"
            fields[name] = value
        assert set(fields) <= {"id", "data"}, block
        frames.append(Frame(fields.get("id"), fields.get("data"), comment))
    return frames


def http_scope(
    method: str,
    raw_path: bytes,
    query_string: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
) -> dict[str, Any]:
    """The scope a server makes of an HTTP/1.1 request from 127.0.0.1 (`path` decoded as
    servers do, `raw_path` as sent)."""
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": unquote(raw_path.decode("latin-1")),
        "raw_path": raw_path,
        "root_path": "",
        "query_string": query_string,
        "headers": headers or [],
        "client": ("127.0.0.1", 5000),
        "server": ("127.0.0.1", 8000),
    }


@dataclass
class Request:
    app: ASGIApp
    path: str
    params: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    method: str = "GET"
    send_blocked: bool = False

    def __post_init__(self) -> None:
        self.status: int | None = None
        self.response_headers: dict[str, str] = {}
        self.body = bytearray()
        self.chunks = 0
        self.complete = False
        self._changed = asyncio.Event()
        self._disconnect = asyncio.Event()
        self._unblock = asyncio.Event()
        self._requested = False
        self.task: asyncio.Task[None] | None = None

    def scope(self) -> dict[str, Any]:
        headers = [(k.lower().encode(), v.encode()) for k, v in self.headers.items()]
        return http_scope(self.method, self.path.encode(), urlencode(self.params).encode(), headers)

    async def receive(self) -> Message:
        if not self._requested:
            self._requested = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._disconnect.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.send_blocked and message["type"] == "http.response.body":
            await self._unblock.wait()
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.response_headers = {k.decode(): v.decode() for k, v in message["headers"]}
        else:
            assert not self.complete, "a message after the response completed"
            self.body += message.get("body", b"")
            self.chunks += 1
            self.complete = not message.get("more_body", False)
        self._changed.set()

    def start(self) -> Request:
        self.task = asyncio.ensure_future(self.app(self.scope(), self.receive, self.send))
        return self

    async def run(self) -> Request:
        """Serve a finite response to the end."""
        await asyncio.wait_for(self.app(self.scope(), self.receive, self.send), WAIT)
        return self

    def disconnect(self) -> None:
        self._disconnect.set()

    def unblock(self) -> None:
        self.send_blocked = False
        self._unblock.set()

    @property
    def frames(self) -> list[Frame]:
        return parse_frames(bytes(self.body))

    @property
    def events(self) -> list[dict[str, Any]]:
        return [f.envelope for f in self.frames if not f.comment]

    async def wait_for(self, predicate: Any, timeout: float = WAIT) -> None:
        async def until() -> None:
            while not predicate(self):
                self._changed.clear()
                if self.task is not None and self.task.done():
                    self.task.result()
                    assert predicate(self), "the response ended before the condition held"
                await self._changed.wait()

        await asyncio.wait_for(until(), timeout)

    async def wait_events(self, count: int) -> list[dict[str, Any]]:
        await self.wait_for(lambda r: len(r.events) >= count)
        return self.events

    async def finished(self, timeout: float = WAIT) -> None:
        """Wait until the app returns."""
        assert self.task is not None
        await asyncio.wait_for(asyncio.shield(self.task), timeout)

    def json(self) -> Any:
        return json.loads(bytes(self.body))


async def wait_all(requests: list[Request], count: int) -> None:
    """Until every request has received `count` events."""
    await asyncio.gather(*(r.wait_events(count) for r in requests))


async def hang_up_all(requests: list[Request]) -> None:
    """Disconnect every client and wait until the app has returned for each."""
    for r in requests:
        r.disconnect()
    await asyncio.gather(*(r.finished() for r in requests))
