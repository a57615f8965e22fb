"""An httpx transport that runs an ASGI app in-process and streams its response body.

`httpx.ASGITransport` (and respx's ASGI handler, built on it) waits for the whole body, so an
endless SSE stream never returns there. This transport hands back the response as soon as the
app has started it, yields each body chunk as the app sends it, and when the response is closed
tells the app the client disconnected.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import unquote

import httpx

from gateway_kit.types import ASGIApp, Message, Scope

# How many body chunks may wait for the reader before the app's send() blocks: a small number
# keeps back-pressure, so a reader that stops reading makes the app wait, as a socket would.
MAX_BUFFERED_CHUNKS = 8
# How long a closed response waits for the app to notice the disconnect before cancelling it.
CLOSE_GRACE_SECONDS = 1.0
CLIENT_GONE = "the client closed the response"
NO_RESPONSE = "the ASGI app returned without starting a response"
_END = None


class _Exchange:
    """One request/response between the transport and the app."""

    def __init__(self, request_body: bytes, max_chunks: int) -> None:
        self._request_body: bytes | None = request_body
        self.started = asyncio.Event()
        self.disconnected = asyncio.Event()
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: asyncio.Queue[bytes | None] = asyncio.Queue(maxsize=max_chunks)
        self._complete = False

    async def receive(self) -> Message:
        if self._request_body is not None:
            body, self._request_body = self._request_body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.disconnected.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if self.disconnected.is_set():
            raise OSError(CLIENT_GONE)  # what uvicorn does too once the client has gone
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.headers = [(bytes(k), bytes(v)) for k, v in message.get("headers", [])]
            self.started.set()
        elif message["type"] == "http.response.body" and not self._complete:
            if message.get("body"):
                await self.chunks.put(bytes(message["body"]))
            if not message.get("more_body", False):
                self._complete = True
                await self.chunks.put(_END)

    def discard_unread(self) -> None:
        # Frees an app blocked in send() on a full queue; it then sees the disconnect.
        while not self.chunks.empty():
            self.chunks.get_nowait()


class _StreamingBody(httpx.AsyncByteStream):
    def __init__(self, exchange: _Exchange, app_task: asyncio.Task[None]) -> None:
        self._exchange = exchange
        self._app_task = app_task

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            getter = asyncio.ensure_future(self._exchange.chunks.get())
            try:
                await asyncio.wait({getter, self._app_task}, return_when=asyncio.FIRST_COMPLETED)
            finally:  # the reader may be cancelled while waiting: leave no pending get()
                waiting = not getter.done()
                if waiting:
                    getter.cancel()
            if waiting:
                break  # the app returned: what it left in the queue is all there is
            chunk = getter.result()
            if chunk is _END:
                return
            yield chunk
        while not self._exchange.chunks.empty():
            chunk = self._exchange.chunks.get_nowait()
            if chunk is _END:
                return
            yield chunk
        self._app_task.result()  # re-raise what the app raised

    async def aclose(self) -> None:
        self._exchange.disconnected.set()
        self._exchange.discard_unread()
        if not self._app_task.done():
            await asyncio.wait({self._app_task}, timeout=CLOSE_GRACE_SECONDS)
            self._app_task.cancel()
        # The app may fail on its way out because the client left; that is not the reader's error.
        await asyncio.gather(self._app_task, return_exceptions=True)


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """Serve httpx requests from an ASGI app, streaming response bodies chunk by chunk."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        client: tuple[str, int] = ("127.0.0.1", 123),
        root_path: str = "",
        max_buffered_chunks: int = MAX_BUFFERED_CHUNKS,
    ) -> None:
        self.app = app
        self.client = client
        self.root_path = root_path
        self.max_buffered_chunks = max_buffered_chunks

    async def _run(self, scope: Scope, exchange: _Exchange) -> None:
        await self.app(scope, exchange.receive, exchange.send)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(await request.aread(), self.max_buffered_chunks)
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": request.url.scheme,
            "path": unquote(request.url.path),
            "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "server": (request.url.host, request.url.port),
            "client": self.client,
            "root_path": self.root_path,
        }
        app_task = asyncio.create_task(self._run(scope, exchange))
        started = asyncio.ensure_future(exchange.started.wait())
        await asyncio.wait({started, app_task}, return_when=asyncio.FIRST_COMPLETED)
        if not exchange.started.is_set():
            started.cancel()
            app_task.result()  # re-raise what the app raised before answering
            raise RuntimeError(NO_RESPONSE)
        return httpx.Response(
            exchange.status,
            headers=exchange.headers,
            stream=_StreamingBody(exchange, app_task),
            request=request,
        )
