"""The per-event-loop machinery behind the stream routes, and serving one stream request.

Each event loop that serves requests gets its own fan-out hub, shutdown watch and run index
(asyncio objects belong to one loop); a process normally runs one. One `StreamService` is shared
by the parts that read the log (`StreamRoutes`, `LegacyTaskPoll`), so that they share the hub,
the run index and the shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable

from ..exceptions import DatabaseUnavailable
from ..http.errors import HTTPError, send_error, send_no_content
from ..http.request import Request
from ..identity.credentials import CredentialView
from ..log import EventLog
from ..principal import principal_of
from .cursor import resume_point
from .fanout import Hub
from .page import serve_page
from .request import Cursor, wants_json
from .responder import EventStreamResponder, StreamOptions, StreamSource
from .revocation import end_when_revoked
from .runindex import RunEntry, RunIndex
from .shutdown import ShutdownWatch
from .sse import reset_frame

logger = logging.getLogger(__name__)

SHUTTING_DOWN = "shutting_down"
LOG_UNAVAILABLE = "log_unavailable"
SHUTTING_DOWN_MESSAGE = "the server is shutting down; reconnect with your cursor"
LOG_UNAVAILABLE_MESSAGE = "the event log cannot be read right now; retry with your cursor"
RETRY_AFTER = (b"retry-after", b"1")
NO_SERVICE = "{part} needs service= (a StreamService) or log= (the EventLog to serve)"
TWO_LOGS = "{part} was handed a log and a StreamService of another log"


def log_unavailable() -> HTTPError:
    return HTTPError(503, LOG_UNAVAILABLE, LOG_UNAVAILABLE_MESSAGE, [RETRY_AFTER])


def service_of(
    part: str,
    service: StreamService | None,
    log: EventLog | None,
    options: StreamOptions | None = None,
) -> StreamService:
    """The service a part is handed, or one made from the log it is handed instead."""
    if service is not None:
        if log is not None and log is not service.log:
            raise ValueError(TWO_LOGS.format(part=part))
        return service
    if log is None:
        raise TypeError(NO_SERVICE.format(part=part))
    return StreamService(log, options)


class LoopState:
    __slots__ = ("hub", "runs", "watch")

    def __init__(self, log: EventLog, options: StreamOptions) -> None:
        self.hub = Hub(log, queue_size=options.queue_size, max_bytes=options.max_page_bytes)
        self.watch = ShutdownWatch(self.hub)
        self.runs = RunIndex(log, max_bytes=options.max_page_bytes)


class StreamService:
    """Serves the log to clients: SSE and JSON pages of a stream or a run.

    :param credentials: where revocations and logouts are learnt, so that a stream opened
        with a credential ends when it does; None: streams are not ended for that.
    """

    def __init__(
        self,
        log: EventLog,
        options: StreamOptions | None = None,
        *,
        credentials: CredentialView | None = None,
    ) -> None:
        self.log = log
        self.options = options or StreamOptions()
        self.credentials = credentials
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

    async def run_entry(self, run_id: str) -> RunEntry | None:
        """What the log holds of run `run_id` (None: nothing); 503 when it cannot be read."""
        try:
            return await self.state().runs.refresh(run_id)
        except DatabaseUnavailable:
            raise
        except Exception:
            logger.exception("reading a run from the log failed")
            raise log_unavailable() from None

    # --- shutdown ------------------------------------------------------------------------

    def close_streams(self) -> None:
        """End every open stream (clients resume by cursor) and refuse new ones; thread-safe."""
        self._closing = True
        self._each_loop(lambda state: state.watch.close())

    def reopen(self) -> None:
        self._closing = False
        self._each_loop(lambda state: state.watch.reopen())

    async def startup(self) -> None:
        self.reopen()

    async def shutdown(self) -> None:
        self.close_streams()

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

    # --- serving -------------------------------------------------------------------------

    async def serve(
        self,
        request: Request,
        cursor: Cursor,
        *,
        stream: str | None = None,
        run: RunEntry | None = None,
        run_id: str | None = None,
    ) -> None:
        """Serve the events of `stream`, or of run `run_id` (whose `run` entry is known),
        after `cursor`: a JSON page, or the SSE stream."""
        send = request.send
        if wants_json(request.scope):
            params = request.query
            try:
                await serve_page(
                    send,
                    self.log,
                    cursor,
                    params,
                    stream=stream,
                    run_id=run_id,
                    max_bytes=self.options.max_page_bytes,
                )
            except (HTTPError, DatabaseUnavailable):
                raise
            except Exception:
                logger.exception("serving a JSON page failed")
                raise log_unavailable() from None
            return
        state = self.state()
        if state.watch.closing:
            await send_error(send, 503, SHUTTING_DOWN, SHUTTING_DOWN_MESSAGE, [RETRY_AFTER])
            return
        try:
            sub = await state.hub.subscribe(stream=stream, run_id=run_id)
        except DatabaseUnavailable:
            raise
        except Exception:
            logger.exception("starting the live reader failed")
            raise log_unavailable() from None
        unwatch = end_when_revoked(self.credentials, principal_of(request.scope), sub)
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
                        resume.after,
                        None,
                        self.options.replay_page,
                        run_id=run_id,
                        max_bytes=self.options.max_page_bytes,
                    )
                    if not source.first_page and run is not None:
                        run = await state.runs.refresh(run_id) or run
                        if run.ended_by(resume.after):
                            await send_no_content(send)  # EventSource stops reconnecting
                            return
            except DatabaseUnavailable:
                raise
            except Exception:
                logger.exception("opening a stream failed")
                raise log_unavailable() from None
            state.watch.watch(sub, send)
            await EventStreamResponder(source, self.options, request.receive, send)()
        finally:
            unwatch()
            state.hub.unsubscribe(sub)
            state.watch.forget(sub)
