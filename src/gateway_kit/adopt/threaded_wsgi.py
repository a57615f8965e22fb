"""`ThreadedWSGI`: a WSGI app alone, as an ASGI app, each request in a daemon thread of its own.

The app sees the environ ``a2wsgi`` builds for the gateway (its ``build_environ``), less the
ASGI scope, so that the two sides of a check differ only by what the gateway does. Threads of
its own, as daemons, and not a pool: an answer that never ends (a Flask generator streaming
events) must not hold the command at exit. The thread stops iterating the app's answer when
its client has gone or after `max_body` bytes, and closes it (as a server does; a generator
then ends); one blocked inside the app is left to end with the process.
"""

from __future__ import annotations

import asyncio
import io
import sys
import threading
from collections.abc import Callable, Iterable
from typing import Any

from a2wsgi.wsgi import build_environ

from ..types import Message, Receive, Scope, Send
from ..wrapped import answer_lifespan

END = None
Put = Callable[[Message | BaseException | None], None]


class ThreadedWSGI:
    def __init__(self, app: Any, *, max_body: int) -> None:
        self.app = app
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            body.extend(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body", False):
                break
        # a2wsgi's body reader is read in full already: a plain file of it does the same.
        environ: dict[str, Any] = dict(build_environ(scope, io.BytesIO(bytes(body))))  # type: ignore[arg-type]
        environ.pop("asgi.scope", None)
        environ["wsgi.errors"] = sys.stderr
        environ["wsgi.input_terminated"] = True
        loop = asyncio.get_running_loop()
        messages: asyncio.Queue[Message | BaseException | None] = asyncio.Queue()
        stop = threading.Event()

        def put(item: Message | BaseException | None) -> None:
            try:
                loop.call_soon_threadsafe(messages.put_nowait, item)
            except RuntimeError:  # the loop has closed: nobody reads any more
                stop.set()

        answering = Answering(self.app, environ, put, stop, self.max_body)
        threading.Thread(target=answering.run, name="adopt-wsgi", daemon=True).start()
        try:
            while (item := await messages.get()) is not END:
                if isinstance(item, BaseException):
                    raise item
                await send(item)
        finally:
            stop.set()


class Answering:
    """One WSGI call in its thread: each message goes to `put`, then `END`."""

    def __init__(
        self, app: Any, environ: dict[str, Any], put: Put, stop: threading.Event, max_body: int
    ) -> None:
        self.app, self.environ, self.put, self.stop = app, environ, put, stop
        self.max_body = max_body
        self.produced = 0

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: Any = None
    ) -> Callable[[bytes], None]:
        if exc_info is not None and self.produced:
            raise exc_info[1].with_traceback(exc_info[2])
        self.put(
            {
                "type": "http.response.start",
                "status": int(status.split(" ", 1)[0]),
                "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers],
            }
        )
        return self.write

    def write(self, chunk: bytes) -> None:
        if chunk:
            self.produced += len(chunk)
            self.put({"type": "http.response.body", "body": bytes(chunk), "more_body": True})

    def run(self) -> None:
        try:
            result: Iterable[bytes] = self.app(self.environ, self.start_response)
            try:
                for chunk in result:
                    self.write(chunk)
                    if self.stop.is_set() or self.produced > self.max_body:
                        break
                else:
                    self.put({"type": "http.response.body", "body": b"", "more_body": False})
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except BaseException as exc:  # the server's side of it: a 500, or an answer cut short
            self.put(exc)
        finally:
            self.put(END)
