"""The stream endpoints of a `Gateway`, and the per-event-loop machinery behind them.

Each event loop that serves requests gets its own fan-out hub, shutdown watch and run index
(asyncio objects belong to one loop); a process normally runs one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable

from ..log import EventLog
from ..types import Receive, Scope, Send
from .cursor import resume_point
from .errors import LOG_UNAVAILABLE, SHUTTING_DOWN, send_error, send_no_content
from .fanout import Hub
from .legacy import serve_legacy_poll
from .page import serve_page
from .request import BadRequest, query_params, request_cursor, wants_json
from .responder import EventStreamResponder, StreamOptions, StreamSource
from .runindex import RunIndex
from .shutdown import ShutdownWatch
from .sse import reset_frame

logger = logging.getLogger("gateway_kit.streams")

SHUTTING_DOWN_MESSAGE = "the server is shutting down; reconnect with your cursor"
LOG_UNAVAILABLE_MESSAGE = "the event log cannot be read right now; retry with your cursor"
RETRY_AFTER = (b"retry-after", b"1")


class LoopState:
    __slots__ = ("hub", "runs", "watch")

    def __init__(self, log: EventLog, options: StreamOptions) -> None:
        self.hub = Hub(log, queue_size=options.queue_size)
        self.watch = ShutdownWatch(self.hub)
        self.runs = RunIndex(log)


class StreamService:
    """Serves the log to clients: SSE, JSON pages and the legacy task poll."""

    def __init__(self, log: EventLog, options: StreamOptions) -> None:
        self.log = log
        self.options = options
        self._states: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopState] = (
            weakref.WeakKeyDictionary()
        )
        self._states_lock = threading.Lock()
        self._closing = False

    def state(self) -> LoopState:
        loop = asyncio.get_running_loop()
        with self._states_lock:
            state = self._states.get(loop)
            if state is None:
                state = self._states[loop] = LoopState(self.log, self.options)
                state.watch.closing = self._closing
        return state

    # --- shutdown ------------------------------------------------------------------------

    def close_streams(self) -> None:
        """End every open stream (clients resume by cursor) and refuse new ones; thread-safe."""
        self._closing = True
        self._each_loop(lambda state: state.watch.close())

    def reopen(self) -> None:
        self._closing = False
        self._each_loop(lambda state: state.watch.reopen())

    def _each_loop(self, action: Callable[[LoopState], None]) -> None:
        with self._states_lock:
            states = list(self._states.items())
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for loop, state in states:
            if loop is current:
                action(state)
            else:
                with contextlib.suppress(RuntimeError):  # that loop is closed
                    loop.call_soon_threadsafe(action, state)

    # --- endpoints -----------------------------------------------------------------------

    async def stream_events(self, scope: Scope, receive: Receive, send: Send, stream: str) -> None:
        await self._events(scope, receive, send, stream=stream, run_id=None)

    async def run_events(self, scope: Scope, receive: Receive, send: Send, run_id: str) -> None:
        await self._events(scope, receive, send, stream=None, run_id=run_id)

    async def legacy_poll(self, scope: Scope, send: Send, task_id: str) -> bool:
        """Answer ``GET /api/tasks/<task_id>``; False when the log does not know the task."""
        try:
            return await serve_legacy_poll(
                send, self.log, self.state().runs, task_id, query_params(scope)
            )
        except BadRequest as exc:
            await send_error(send, 400, exc.code, exc.message)
        except Exception:
            logger.exception("serving a legacy task poll failed")
            await send_error(send, 503, LOG_UNAVAILABLE, LOG_UNAVAILABLE_MESSAGE, [RETRY_AFTER])
        return True

    async def _events(
        self, scope: Scope, receive: Receive, send: Send, *, stream: str | None, run_id: str | None
    ) -> None:
        params = query_params(scope)
        try:
            cursor = request_cursor(scope, params, epoch=self.log.epoch)
            if wants_json(scope):
                await serve_page(send, self.log, cursor, params, stream=stream, run_id=run_id)
                return
        except BadRequest as exc:
            await send_error(send, 400, exc.code, exc.message)
            return
        except Exception:
            logger.exception("serving a JSON page failed")
            await send_error(send, 503, LOG_UNAVAILABLE, LOG_UNAVAILABLE_MESSAGE, [RETRY_AFTER])
            return
        state = self.state()
        if state.watch.closing:
            await send_error(send, 503, SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE, [RETRY_AFTER])
            return
        try:
            sub = await state.hub.subscribe(stream=stream, run_id=run_id)
        except Exception:
            logger.exception("starting the live reader failed")
            await send_error(send, 503, LOG_UNAVAILABLE, LOG_UNAVAILABLE_MESSAGE, [RETRY_AFTER])
            return
        try:
            try:
                resume = await resume_point(
                    self.log, cursor, known_head=sub.high_water, stream=stream, run_id=run_id
                )
                source = StreamSource(self.log, sub, resume.after, stream=stream, run_id=run_id)
                if resume.reset is not None:
                    source.preamble = reset_frame(resume.reset)
                elif run_id is not None:
                    source.first_page = await self.log.aread(
                        resume.after, None, self.options.replay_page, run_id=run_id
                    )
                    if not source.first_page:
                        entry = await state.runs.refresh(run_id)
                        if entry is not None and entry.ended_by(resume.after):
                            await send_no_content(send)  # EventSource stops reconnecting
                            return
            except Exception:
                logger.exception("opening a stream failed")
                await send_error(send, 503, LOG_UNAVAILABLE, LOG_UNAVAILABLE_MESSAGE, [RETRY_AFTER])
                return
            state.watch.watch(sub, send)
            await EventStreamResponder(source, self.options, receive, send)()
        finally:
            state.hub.unsubscribe(sub)
            state.watch.forget(sub)
