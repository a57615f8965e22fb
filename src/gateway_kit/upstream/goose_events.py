"""One connection to goose's `GET /sessions/{id}/events`, read as typed frames.

Deliberate deviation from SSE's last-event-id rule: the SSE parser (httpx-sse, like a browser)
hands an event without an `id:` line the previous event's id. goose omits `id:` on purpose (its
`ActiveRequests` frame must not move the cursor), and within one connection its ids strictly
increase, so an id equal to the previous event's is a carried-over one and the frame gets
`id=None`. A consumer that deduplicates by goose id never drops a frame for a stale id.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from types import TracebackType

import httpx
from httpx_sse import ServerSentEvent, aconnect_sse

from gateway_kit.exceptions import UpstreamError, UpstreamTooFarBehind, UpstreamUnavailable
from gateway_kit.upstream.goose_errors import error_from_response
from gateway_kit.upstream.goose_frames import UpstreamFrame, parse_frame

EVENT_STREAM_CONTENT_TYPE = "text/event-stream"
NOT_ENTERED_MESSAGE = "open the goose event stream with `async with` before iterating it"
UNREACHABLE_MESSAGE = "cannot reach goose at {url}: {error!r}"
LOST_MESSAGE = "lost the goose event stream {url}: {error!r}"
NOT_SSE_MESSAGE = "goose answered {url} with content type {content_type!r}, not an event stream"
TOO_FAR_BEHIND_FALLBACK = "Client too far behind"


class GooseEventStream:
    """`async with` opens the stream (raising the typed errors); iterating yields frames.

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
        self._events: AsyncIterator[ServerSentEvent] | None = None
        self._previous_sse_id = ""

    async def __aenter__(self) -> GooseEventStream:
        try:
            source = await self._stack.enter_async_context(
                aconnect_sse(
                    self._client,
                    "GET",
                    self.url,
                    headers=dict(self._headers),
                    timeout=self._timeout,
                )
            )
            response = source.response
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
        events = source.aiter_sse()
        self._stack.push_async_callback(events.aclose)
        self._events = events
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._events = None
        await self._stack.aclose()

    def __aiter__(self) -> GooseEventStream:
        return self

    async def __anext__(self) -> UpstreamFrame:
        if self._events is None:
            raise RuntimeError(NOT_ENTERED_MESSAGE)
        while True:
            try:
                sse = await anext(self._events)
            except httpx.TransportError as exc:
                raise UpstreamUnavailable(LOST_MESSAGE.format(url=self.url, error=exc)) from exc
            raw_id = "" if sse.id == self._previous_sse_id else sse.id
            self._previous_sse_id = sse.id
            # SSE dispatches no event for an empty data buffer; httpx-sse does when an id is set.
            if sse.data == "":
                continue
            frame = parse_frame(raw_id, sse.data)
            if frame.too_far_behind:
                error = frame.data.get("error")
                message = error if isinstance(error, str) else TOO_FAR_BEHIND_FALLBACK
                raise UpstreamTooFarBehind(self.sent_last_event_id, message)
            if frame.id is not None:
                self.last_event_id = frame.id
            return frame
