"""The SSE response of one client: replay from the log, then live events from the fan-out.

Four tasks race in one group, and the first to finish cancels the others: *produce* (replay,
then the subscription's queue), *ping and watch writes* (a ``: ping`` comment every
``ping_interval``, and a check that no write has been waiting longer than ``send_timeout``),
*watch disconnect* (``receive()`` until ``http.disconnect``) and *watch stop* (the fan-out
dropped this client for being too slow, or the server is stopping). A client that stops reading
is thus cut off, once a write has to wait for it: when what it has not read no longer fits in
the kernel's buffers and the server's (till then it looks like any client). ``OSError`` while
writing means the client is gone; a write that waits longer than ``send_timeout`` means it
stopped reading.

Data writes carry no timer of their own: with a hundred subscribers, one timer per event and
client would be a tenth of the cost of delivering it. The watcher looks at the write in
progress a few times per ``send_timeout`` instead, so a stuck write is noticed between one and
one and a quarter ``send_timeout`` after it began. A ping is skipped while a data write is in
progress (the client is not idle), a data write waits for a ping being written, and a ping's own
write has a timeout.

Replay (`replay_pages`) sends each page read from the log in body chunks of
`REPLAY_CHUNK_BYTES` (hundreds of small frames per write), and reads the next page while the
current one is being written. A page is capped by the bytes of its events' data too
(``max_page_bytes``), so a client costs a few pages of memory however large the events are.

A client cut off for not keeping up loses its connection, not only its subscription, and
resumes by cursor like after any dropped connection. When the fan-out dropped it (its queue
overflowed), the end of the response is written and must have left the server's buffer within
`CLOSE_TIMEOUT`: a client that still reads, only too slowly, gets that clean end. Otherwise,
and at once when a write waited longer than ``send_timeout``, its connection is reset
(`connection.py`). Closing it the usual way would wait for the server's buffer to drain, which for
a client that does not read is never, and the connection would keep that buffer and the kernel's.

A normal end, the server stopping, or the log closing ends the response cleanly: its end is
given `CLOSE_TIMEOUT` to be written, and past it the response is left unfinished and the server
closes the connection in its own time (uvicorn logs "ASGI callable returned without completing
response" for it). A server that does not show its transport gets that for cut-offs too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from ..log import Event, EventLog
from ..settings import (
    DEFAULT_MAX_PAGE_BYTES,
    DEFAULT_PING_INTERVAL,
    DEFAULT_QUEUE_SIZE,
    DEFAULT_SEND_TIMEOUT,
)
from ..types import Receive, Send
from .connection import ClientConnection, client_connection
from .fanout import STOP_OVERFLOW, Subscription
from .replay import replay_pages
from .revocation import STOP_REVOKED
from .sse import PING, SSE_HEADERS, frame_chunks

logger = logging.getLogger(__name__)

REPLAY_PAGE = 1000
# A replay page is written in chunks of about this size: one write for a page of small events,
# and no copy of a whole page of large ones, in the gateway or in the server's write buffer.
REPLAY_CHUNK_BYTES = 256 * 1024
# The closing write may meet a client that stopped reading: it gets little time.
CLOSE_TIMEOUT = 1.0

FINISHED = "finished"  # a run stream sent its terminal event
DISCONNECTED = "disconnected"
STALLED = "stalled"  # a write waited longer than the send timeout
FAILED = "failed"


class ClientGone(Exception):
    """Writing to the client failed or timed out."""


class ClientStalled(ClientGone):
    """A write to the client waited longer than the send timeout: it stopped reading."""


@dataclass(frozen=True, slots=True)
class StreamOptions:
    ping_interval: float = DEFAULT_PING_INTERVAL
    send_timeout: float = DEFAULT_SEND_TIMEOUT
    queue_size: int = DEFAULT_QUEUE_SIZE
    replay_page: int = REPLAY_PAGE
    max_page_bytes: int = DEFAULT_MAX_PAGE_BYTES  # events' data in one page read, besides one


@dataclass(slots=True)
class StreamSource:
    """What one response serves: events of `stream` or of `run_id` after `after`."""

    log: EventLog
    sub: Subscription
    after: int
    stream: str | None = None
    run_id: str | None = None
    preamble: bytes = b""  # e.g. a reset frame, written before the replay
    first_page: list[Event] | None = None  # already read after `after`, if the caller did


class EventStreamResponder:
    def __init__(
        self, source: StreamSource, options: StreamOptions, receive: Receive, send: Send
    ) -> None:
        self.source = source
        self.options = options
        self.receive = receive
        self.send = send
        self.writing_since: float | None = None  # loop time the data write in progress began
        self.pinging = asyncio.Lock()  # held while a ping is written: data waits for it

    async def __call__(self) -> None:
        await self.send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        outcome = await race(
            self.produce(), self.ping_and_watch_writes(), self.watch_disconnect(), self.watch_stop()
        )
        if outcome == DISCONNECTED:
            return
        if outcome == STOP_OVERFLOW:
            logger.info("closing a stream whose client cannot keep up; it resumes by cursor")
        elif outcome == STOP_REVOKED:
            logger.info("closing a stream whose credential was revoked or logged out")
        connection = client_connection(self.send)
        if outcome != STALLED and await self.end(connection):
            return
        # Its writes stall, or its end cannot leave the server: closed the usual way, the
        # connection would wait for ever for a buffer the client does not read.
        if connection is not None:
            logger.info("resetting the connection of a client that stopped reading")
            await connection.reset()

    async def end(self, connection: ClientConnection | None = None) -> bool:
        """Send the end of the response within `CLOSE_TIMEOUT`. True if it was written, and had
        left the server's buffer by then when `connection` shows that buffer."""
        try:
            async with asyncio.timeout(min(CLOSE_TIMEOUT, self.options.send_timeout)):
                await self.send({"type": "http.response.body", "body": b"", "more_body": False})
                if connection is not None:
                    await connection.drained()
        except (OSError, TimeoutError):
            return False
        return True

    async def write(self, body: bytes) -> None:
        """Write a data chunk; `ping_and_watch_writes` ends the response if it takes too long."""
        if self.pinging.locked():  # one write at a time: ASGI does not promise more
            async with self.pinging:
                pass
        self.writing_since = asyncio.get_running_loop().time()
        try:
            await self.send({"type": "http.response.body", "body": body, "more_body": True})
        except OSError as exc:
            raise ClientGone from exc
        finally:
            self.writing_since = None

    async def produce(self) -> str:
        src = self.source
        if src.preamble:
            await self.write(src.preamble)
        last, finished = await self.replay()
        if finished:
            return FINISHED
        run_stream = src.run_id is not None
        while True:
            await src.sub.wake.wait()
            chunk: list[bytes] = []
            for seq, data, terminal, _ in src.sub.take():
                if seq <= last:
                    continue  # already sent by the replay
                chunk.append(data)
                last = seq
                if terminal and run_stream:
                    finished = True
                    break
            if chunk:
                await self.write(b"".join(chunk))
            if finished:
                return FINISHED

    async def replay(self) -> tuple[int, bool]:
        """Send the log's events up to the subscription's high-water mark, page by page; the
        last seq sent, and whether it ended the run."""
        src = self.source
        last = src.after
        pages = replay_pages(
            src.log,
            src.after,
            src.sub.high_water,
            limit=self.options.replay_page,
            max_bytes=self.options.max_page_bytes,
            stream=src.stream,
            run_id=src.run_id,
            first=src.first_page,
            read_ahead=True,
        )
        async with contextlib.aclosing(pages):
            async for page in pages:
                for chunk in frame_chunks(page, REPLAY_CHUNK_BYTES):
                    await self.write(chunk)
                last = page[-1].seq
                if src.run_id is not None and page[-1].is_terminal:
                    return last, True
        return last, False

    async def ping_and_watch_writes(self) -> str:
        loop = asyncio.get_running_loop()
        ping_interval, send_timeout = self.options.ping_interval, self.options.send_timeout
        tick = min(ping_interval, send_timeout / 4)
        next_ping = loop.time() + ping_interval
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            began = self.writing_since
            if began is not None:
                if now - began >= send_timeout:
                    raise ClientStalled("a write took longer than the send timeout")
                continue  # data is being written: no ping needed
            if now >= next_ping:
                next_ping = now + ping_interval
                try:
                    async with self.pinging, asyncio.timeout(send_timeout):
                        await self.send(
                            {"type": "http.response.body", "body": PING, "more_body": True}
                        )
                except OSError as exc:
                    raise ClientGone from exc
                except TimeoutError as exc:
                    raise ClientStalled("a ping took longer than the send timeout") from exc

    async def watch_disconnect(self) -> str:
        while True:
            message = await self.receive()
            if message["type"] == "http.disconnect":
                return DISCONNECTED

    async def watch_stop(self) -> str:
        await self.source.sub.stopped.wait()
        return self.source.sub.stop_reason or STOP_OVERFLOW


async def race(*coros: Coroutine[Any, Any, str]) -> str:
    """Run the coroutines as tasks until the first finishes; cancel the rest; return its result.

    A `ClientStalled` from any of them ends the race as `STALLED`, any other `ClientGone` as
    `DISCONNECTED`; any other error is logged and ends the race too (the response is then
    closed, and the client resumes by cursor).
    """
    tasks = [asyncio.ensure_future(c) for c in coros]
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    first = next(t for t in tasks if t in done)
    if first.cancelled():
        return DISCONNECTED
    error = first.exception()
    if error is None:
        return first.result()
    if isinstance(error, ClientStalled):
        return STALLED
    if isinstance(error, ClientGone):
        return DISCONNECTED
    logger.error("a stream failed; closing it", exc_info=error)
    return FAILED
