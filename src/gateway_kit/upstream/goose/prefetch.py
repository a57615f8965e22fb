"""`ReadAhead`: goose's frames, read ahead of the pump into a queue.

The pump writes every frame that has already arrived in one transaction, so a fast goose costs
one commit per batch rather than one per event; knowing whether another frame is ready takes a
queue (an async iterator can only be awaited). The queue holds what each read of the stream
brought, a list of frames, so a burst costs one hand-over, not one per frame. While the pump
writes, reading pauses: parsing would only compete with the write for the interpreter, and the
write's thread would wait for it at every step.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Protocol

from ..frames import UpstreamFrame

# Reads parsed ahead at most; beyond it the reader waits for the pump. A read brings at most
# what one network read returned (64 KiB from httpcore), so this bounds the memory held.
QUEUE_READS = 64


class BatchSource(Protocol):
    async def next_batch(self) -> list[UpstreamFrame]:
        """Every frame that has arrived (waiting for one); `StopAsyncIteration` at the end."""


class _End:
    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class ReadAhead:
    def __init__(self, frames: BatchSource) -> None:
        self._queue: asyncio.Queue[list[UpstreamFrame] | _End] = asyncio.Queue(QUEUE_READS)
        self._reading = asyncio.Event()
        self._reading.set()
        self._task = asyncio.create_task(self._read(frames), name="gateway-kit-goose-frames")

    async def _read(self, frames: BatchSource) -> None:
        try:
            while True:
                await self._reading.wait()
                try:
                    batch = await frames.next_batch()
                except StopAsyncIteration:
                    break
                await self._queue.put(batch)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # handed to the pump, which decides what it means
            await self._queue.put(_End(exc))
            return
        await self._queue.put(_End(None))

    @property
    def ready(self) -> bool:
        """Whether a frame (or the end) can be taken without waiting."""
        return not self._queue.empty()

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No reading while the block runs (frames already parsed stay queued)."""
        self._reading.clear()
        try:
            yield
        finally:
            self._reading.set()

    async def next_batch(self, timeout: float | None) -> list[UpstreamFrame]:
        """Every frame read so far, waiting for one when there is none; `StopAsyncIteration`
        at the end, `TimeoutError` after `timeout`, or what reading goose raised."""
        if self._queue.empty() and timeout is not None:
            async with asyncio.timeout(timeout):
                item = await self._queue.get()
        else:
            item = await self._queue.get()
        batch: list[UpstreamFrame] = []
        while True:
            if isinstance(item, _End):
                self._queue.put_nowait(item)  # the end stays the end, after what came before
                if batch:
                    return batch
                if item.error is not None:
                    raise item.error
                raise StopAsyncIteration
            batch.extend(item)
            if self._queue.empty():
                return batch
            item = self._queue.get_nowait()

    async def aclose(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
