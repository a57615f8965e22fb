"""One request to one ASGI app, in process, read within bounds: `call` never waits longer than
`Limits.timeout` for an answer, nor keeps more than `Limits.max_body` bytes of it.

An answer read whole is complete. One that goes on past a bound (a stream that never ends, a
body past `max_body`) is cut: what was read is kept, and the app is told that its client left
(``http.disconnect``, and `OSError` from ``send``, as a server says it), and cancelled if it
goes on. After a whole answer, too, ``receive`` says ``http.disconnect``, as uvicorn does.
An app that raises before it answers is a 500, as a server answers it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from ..types import ASGIApp, Message, Scope
from .recorded import Recorded

CLIENT = ("127.0.0.1", 50000)
DEFAULT_PORTS = {"http": 80, "https": 443}
BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
# How long an app that was told its client left may take to end before it is cancelled.
DISCONNECT_GRACE = 0.5
CLIENT_GONE = "the client of this answer has gone"
NO_ANSWER = "the app ended without a whole answer"
TIMEOUT = "timeout"
MAX_BODY = "max-body"


class ClientGone(OSError):
    """Raised by ``send`` once an answer was read as far as it will be, as a server raises
    `OSError` for a client that left."""


def quiet_about_gone_clients(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """An event loop's exception handler that says nothing of a task that ended because its
    client had gone (a2wsgi's sender of an answer cut short is one, and nobody awaits it)."""
    if not isinstance(context.get("exception"), ClientGone):
        loop.default_exception_handler(context)


@dataclass(frozen=True, slots=True)
class Limits:
    timeout: float
    max_body: int


@dataclass(slots=True)
class Answer:
    """:param status: None when no answer began within the timeout.
    :param cut: why the answer was read in part (`TIMEOUT`, `MAX_BODY`), or None.
    :param error: what the app raised, if it did."""

    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    cut: str | None = None
    error: str | None = None

    def header(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key.lower() == name]


def scope_of(request: Recorded, cookie: str | None) -> Scope:
    """The ASGI scope of `request`, with `cookie` as its only ``Cookie`` header."""
    path, _, query = request.target.partition("#")[0].partition("?")
    hostname, _, port = request.host.rpartition(":")
    if not hostname or not port.isdigit():
        hostname, port = request.host, str(DEFAULT_PORTS[request.scheme])
    headers = [("host", request.host)]
    headers += [(k.lower(), v) for k, v in request.headers if k.lower() != "cookie"]
    if cookie:
        headers.append(("cookie", cookie))
    if request.body or request.method in BODY_METHODS:
        headers.append(("content-length", str(len(request.body))))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.scheme,
        "path": unquote(path),
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "root_path": "",
        "headers": [(k.encode("latin-1"), as_bytes(v)) for k, v in headers],
        "client": CLIENT,
        "server": (hostname, int(port)),
        "state": {},
    }


def as_bytes(value: str) -> bytes:
    try:
        return value.encode("latin-1")
    except UnicodeEncodeError:
        return value.encode()


async def call(app: ASGIApp, scope: Scope, body: bytes, limits: Limits) -> Answer:
    answer = Answer()
    read = bytearray()
    finished = asyncio.Event()  # answered whole, or past max_body
    gone = asyncio.Event()  # the client has read all it will: receive says http.disconnect
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if pending:
            return pending.pop()
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        if gone.is_set():
            raise ClientGone(CLIENT_GONE)
        if message["type"] == "http.response.start":
            answer.status = int(message["status"])
            answer.headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in
                              message.get("headers", [])]  # fmt: skip
        elif message["type"] == "http.response.body":
            chunk = bytes(message.get("body", b""))
            room = limits.max_body - len(read)
            read.extend(chunk[:room])
            if len(chunk) > room:
                answer.cut = MAX_BODY
                finished.set()
                gone.set()
                raise ClientGone(CLIENT_GONE)
            if not message.get("more_body", False):
                finished.set()
                gone.set()  # as uvicorn says, once the answer is whole: the app need not wait
        await asyncio.sleep(0)  # as a server's send does, let others run: the timeout's watch

    async def run() -> None:
        await app(scope, receive, send)

    task = asyncio.create_task(run())
    waiting = asyncio.create_task(finished.wait())
    await asyncio.wait({task, waiting}, timeout=limits.timeout, return_when="FIRST_COMPLETED")
    waiting.cancel()
    if not finished.is_set() and not task.done():
        answer.cut = TIMEOUT
    if answer.cut is not None:
        gone.set()
    await end(task, DISCONNECT_GRACE if answer.cut else limits.timeout)
    if answer.cut is None and not finished.is_set():  # the app ended without a whole answer
        failure = None if task.cancelled() else task.exception()
        answer.error = NO_ANSWER if failure is None else f"{type(failure).__name__}: {failure}"
        answer.status = 500 if answer.status is None else answer.status
    answer.body = bytes(read)
    return answer


async def end(task: asyncio.Task[None], grace: float) -> None:
    """Let `task` end within `grace` seconds, then cancel it (its work after an answer, such
    as a background task, gets that long)."""
    await asyncio.wait({task}, timeout=grace)
    if not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=grace)
    if task.done() and not task.cancelled():
        task.exception()  # retrieved: a server would have logged it
