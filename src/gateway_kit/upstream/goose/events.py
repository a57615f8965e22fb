"""One connection to goose's `GET /sessions/{id}/events`, read as typed frames.

Deliberate deviation from SSE's last-event-id rule: a browser hands an event without an `id:`
line the previous event's id. goose omits `id:` on purpose (its `ActiveRequests` frame must not
move the cursor), so a frame gets the id of its own `id:` line, or `id=None`. A consumer that
deduplicates by goose id never drops a frame for a stale id.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from types import TracebackType

import httpx

from gateway_kit.exceptions import UpstreamError, UpstreamTooFarBehind, UpstreamUnavailable

from ..frames import UpstreamFrame, parse_frame
from .errors import error_from_response
from .sse_parser import SSEParser

EVENT_STREAM_CONTENT_TYPE = "text/event-stream"
NOT_ENTERED_MESSAGE = "open the goose event stream with `async with` before iterating it"
UNREACHABLE_MESSAGE = "cannot reach goose at {url}: {error!r}"
LOST_MESSAGE = "lost the goose event stream {url}: {error!r}"
NOT_SSE_MESSAGE = "goose answered {url} with content type {content_type!r}, not an event stream"
TOO_FAR_BEHIND_FALLBACK = "Client too far behind"
STREAM_HEADERS = {"Accept": EVENT_STREAM_CONTENT_TYPE, "Cache-Control": "no-store"}


class GooseEventStream:
    """`async with` opens the stream (raising the typed errors); iterating yields frames, and
    `next_batch()` every frame that has arrived.

    Iteration ends when goose closes the stream. goose's comment pings are dropped by the SSE
    parser; they still count as traffic for the read timeout, which therefore only fires on a
    dead connection. The "Client too far behind" frame is raised as UpstreamTooFarBehind rather
    than yielded: it is a verdict on the cursor, not a session event.
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        *,
        headers: dict[str, str],
        timeout: httpx.Timeout,
        last_event_id: int | None,
    ) -> None:
        self.url = url
        self.sent_last_event_id = last_event_id
        # The newest goose id received on this connection, or the cursor sent when none yet.
        self.last_event_id = last_event_id
        self._client = client
        self._headers = headers
        self._timeout = timeout
        self._stack = AsyncExitStack()
        self._chunks: AsyncIterator[bytes] | None = None
        self._parser = SSEParser()
        self._ready: deque[UpstreamFrame] = deque()  # parsed, not yet taken
        self._verdict: BaseException | None = None  # raised once what came before is taken

    async def __aenter__(self) -> GooseEventStream:
        try:
            response = await self._stack.enter_async_context(
                self._client.stream(
                    "GET",
                    self.url,
                    headers={**self._headers, **STREAM_HEADERS},
                    timeout=self._timeout,
                )
            )
            if response.status_code != httpx.codes.OK:
                await response.aread()
                raise error_from_response(response)
            content_type = response.headers.get("content-type", "")
            if not content_type.startswith(EVENT_STREAM_CONTENT_TYPE):
                raise UpstreamError(NOT_SSE_MESSAGE.format(url=self.url, content_type=content_type))
        except httpx.TransportError as exc:
            await self._stack.aclose()
            raise UpstreamUnavailable(UNREACHABLE_MESSAGE.format(url=self.url, error=exc)) from exc
        except BaseException:
            await self._stack.aclose()
            raise
        self._chunks = response.aiter_bytes()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._chunks = None
        await self._stack.aclose()

    def __aiter__(self) -> GooseEventStream:
        return self

    async def __anext__(self) -> UpstreamFrame:
        while not self._ready:
            await self._read()
        return self._take()

    async def next_batch(self) -> list[UpstreamFrame]:
        """Every frame that has arrived, waiting for one when none has; `StopAsyncIteration`
        when goose closed the stream."""
        while not self._ready:
            await self._read()
        batch = list(self._ready)
        self._ready.clear()
        for frame in reversed(batch):
            if frame.id is not None:
                self.last_event_id = frame.id
                break
        return batch

    async def _read(self) -> None:
        """Parse the next chunk; raise what ends the stream once nothing is left before it."""
        if self._verdict is not None:
            raise self._verdict
        if self._chunks is None:
            raise RuntimeError(NOT_ENTERED_MESSAGE)
        try:
            chunk = await anext(self._chunks)
        except StopAsyncIteration:
            self._verdict = StopAsyncIteration()
            raise
        except httpx.TransportError as exc:
            raise UpstreamUnavailable(LOST_MESSAGE.format(url=self.url, error=exc)) from exc
        for sse in self._parser.feed(chunk):
            try:
                frame = parse_frame(sse.id, sse.data)
            except UpstreamError as exc:
                self._verdict = exc
                return
            if frame.too_far_behind:
                error = frame.data.get("error")
                message = error if isinstance(error, str) else TOO_FAR_BEHIND_FALLBACK
                self._verdict = UpstreamTooFarBehind(self.sent_last_event_id, message)
                return  # what came after the verdict is not read
            self._ready.append(frame)

    def _take(self) -> UpstreamFrame:
        frame = self._ready.popleft()
        if frame.id is not None:
            self.last_event_id = frame.id
        return frame
