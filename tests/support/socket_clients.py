"""Real clients of a gateway served by uvicorn: python-socketio's `AsyncClient` and httpx."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import socketio
import websockets.asyncio.client
import websockets.exceptions
from websockets.asyncio.client import ClientConnection

SOCKETIO_PATH = "gateway/socket.io"
WAIT = 15.0


@dataclass
class Client:
    """One client of one user: its HTTP credentials, its socket, what it received."""

    base: str
    headers: dict[str, str]
    cookies: httpx.Cookies = field(default_factory=httpx.Cookies)
    origin: str | None = None
    sio: socketio.AsyncClient = field(
        default_factory=lambda: socketio.AsyncClient(reconnection=False)
    )
    events: list[dict[str, Any]] = field(default_factory=list)
    presence: list[dict[str, Any]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        @self.sio.on("event")
        async def on_event(envelope: dict[str, Any]) -> None:
            self.events.append(envelope)
            self.changed.set()

        @self.sio.on("presence")
        async def on_presence(watching: dict[str, Any]) -> None:
            self.presence.append(watching)
            self.changed.set()

    def http(self) -> httpx.AsyncClient:
        headers = dict(self.headers)
        if self.origin is not None:
            headers["origin"] = self.origin
        return httpx.AsyncClient(base_url=self.base, headers=headers, cookies=self.cookies)

    async def ticket(self) -> str:
        async with self.http() as http:
            answer = await http.post("/gateway/socket-tickets")
        assert answer.status_code == 200, answer.text
        ticket: str = answer.json()["ticket"]
        return ticket

    async def auth(self) -> dict[str, str]:
        """What `connect` sends: a new ticket each time it is asked (each reconnect)."""
        return {"ticket": await self.ticket()}

    async def connect(self, auth: Any = None) -> None:
        headers = {"origin": self.origin} if self.origin else {}
        await self.sio.connect(
            self.base,
            socketio_path=SOCKETIO_PATH,
            auth=auth if auth is not None else self.auth,
            headers=headers,
            transports=["websocket"],
            wait_timeout=WAIT,
        )

    async def subscribe(self, stream: str, after: Any = 0) -> dict[str, Any]:
        ack: dict[str, Any] = await self.sio.call(
            "subscribe", {"stream": stream, "after": after}, timeout=WAIT
        )
        return ack

    async def unsubscribe(self, stream: str) -> dict[str, Any]:
        ack: dict[str, Any] = await self.sio.call("unsubscribe", {"stream": stream}, timeout=WAIT)
        return ack

    async def until(self, condition: Callable[[], bool], what: str) -> None:
        """Until `condition()` holds, woken by every message received; fails saying `what`."""
        try:
            async with asyncio.timeout(WAIT):
                while not condition():
                    self.changed.clear()  # before looking: a message after the look sets it
                    if not condition():
                        await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"not in {WAIT:g} s: {what}") from None

    def seqs(self, stream: str) -> list[int]:
        return [e["seq"] for e in self.events if e["stream"] == stream]


async def logged_in(base: str, user: str, password: str) -> Client:
    """A browser tab: logged in on the Flask app (its cookie and CSRF token), its Origin the
    gateway's own."""
    async with httpx.AsyncClient(base_url=base) as http:
        answer = await http.post("/login", json={"username": user, "password": password})
        assert answer.status_code == 200, answer.text
        csrf = answer.json()["csrf_token"]
        cookies = http.cookies
    return Client(base, {"x-csrf-token": csrf}, cookies=cookies, origin=base)


def with_token(base: str, token: str) -> Client:
    """A CLI: a Bearer token, no cookie, no Origin."""
    return Client(base, {"authorization": f"Bearer {token}"})


@asynccontextmanager
async def connected(*clients: Client) -> AsyncIterator[None]:
    try:
        await asyncio.gather(*(c.connect() for c in clients))
        yield
    finally:
        for client in clients:
            await client.sio.disconnect()


class HandClient:
    """A Socket.IO client spoken by hand over one websocket, which reads only when asked to:
    a phone whose app is suspended, a client on a link slower than its streams. Its socket's
    receive buffer is small and its websocket library keeps two messages, so a client that
    does not read soon leaves what the gateway sends it in the gateway's memory."""

    def __init__(self, ws: ClientConnection, sid: str) -> None:
        self.ws = ws
        self.sid = sid
        self.events: list[dict[str, Any]] = []
        self.acks: dict[int, Any] = {}
        self._next_ack = 0

    @classmethod
    async def connect(cls, base: str, ticket: str) -> HandClient:
        host, port = base.removeprefix("http://").split(":")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # before connecting
        sock.connect((host, int(port)))
        ws = await websockets.asyncio.client.connect(
            f"ws://{host}:{port}/{SOCKETIO_PATH}/?EIO=4&transport=websocket",
            sock=sock,
            max_queue=2,
            max_size=None,
            compression=None,
        )
        opened = await ws.recv()
        assert isinstance(opened, str) and opened.startswith("0"), opened
        await ws.send("40" + json.dumps({"ticket": ticket}))
        answer = await ws.recv()
        assert isinstance(answer, str) and answer.startswith("40"), answer
        return cls(ws, json.loads(answer[2:])["sid"])

    async def subscribe(self, stream: str, after: int = 0) -> int:
        """Ask to subscribe, without waiting for the answer; the number of its ack."""
        return await self.ask("subscribe", {"stream": stream, "after": after})

    async def unsubscribe(self, stream: str) -> int:
        return await self.ask("unsubscribe", {"stream": stream})

    async def ask(self, name: str, data: dict[str, Any]) -> int:
        number = self._next_ack
        self._next_ack += 1
        await self.ws.send(f"42{number}" + json.dumps([name, data]))
        return number

    async def read_until(self, condition: Callable[[], bool], what: str) -> None:
        """Read (and answer pings) until `condition()` holds; fails saying `what`."""
        try:
            async with asyncio.timeout(WAIT):
                while not condition():
                    await self._take(await self.ws.recv())
        except TimeoutError:
            raise AssertionError(f"not in {WAIT:g} s: {what}") from None

    async def _take(self, message: str | bytes) -> None:
        assert isinstance(message, str), message
        if message == "2":  # engine.io's ping
            await self.ws.send("3")
        elif message.startswith("42"):
            name, payload = json.loads(message[2:])
            if name == "event":
                self.events.append(payload)
        elif message.startswith("43"):
            number, _, body = message[2:].partition("[")
            self.acks[int(number)] = json.loads("[" + body)[0]

    def seqs(self, stream: str) -> list[int]:
        return [e["seq"] for e in self.events if e["stream"] == stream]

    async def read_until_closed(self) -> None:
        """Read until the gateway closes the connection; fails if it is still open after
        `WAIT` seconds."""
        try:
            async with asyncio.timeout(WAIT):
                async for message in self.ws:
                    await self._take(message)
        except websockets.exceptions.ConnectionClosed:
            pass  # closed without a closing handshake: closed all the same
        except TimeoutError:
            raise AssertionError(f"still open after {WAIT:g} s") from None

    async def close(self) -> None:
        await self.ws.close()
