"""One connection to goose's event stream of a session, read to its end.

A connection knows what it was opened with: the `Last-Event-ID` header sent (None after any
drop, since goose may have restarted meanwhile), the newest goose id the log holds (`known`),
whether a gap after it means lost events, and the requests goose lists as active. The pump that
opens it (`pump.py`) decides what follows its end: reconnect, wait, or give up.

- goose restarted (an id at or below `known`, on a connection that sent a header, or naming
  different content): `GooseRestarted`;
- ids that skip some after `known` on a reconnection: events fell out of goose's buffer, and the
  conversation is appended from `GET /sessions/{id}`;
- a run goose does not list after the reconnect, with no terminal event within the grace
  period, is reported as failed: the upstream lost it. After a header a restarted goose replays
  nothing, so the connection first asks to look again header-less (`RecheckWithoutHeader`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Protocol

from ...bindings.goose_sessions import SessionBinding
from ...exceptions import UpstreamError
from ...log import Event, EventLog
from ...runs.lifecycle import RunLifecycle
from ...runs.model import Run
from ...runs.store import RunStore
from ..appends import FrameAppender
from ..frames import ACTIVE_REQUESTS_TYPE, GOOSE_ERROR, GOOSE_FINISH, UpstreamFrame
from .client import GooseUpstream
from .events import GooseEventStream
from .prefetch import ReadAhead
from .translator import is_duplicate

logger = logging.getLogger(__name__)

LOST_RUN_ERROR = "the upstream lost this run: goose no longer knows request {request_id}"
RECOVERED_TYPE = "UpdateConversation"
MAX_BATCH = 1000  # frames written in one transaction at most


class GooseRestarted(Exception):
    """goosed started a new lifetime: its ids began again at 1."""


class RecheckWithoutHeader(Exception):
    """A run goose should know is missing: look again header-less before calling it lost."""


class Session(Protocol):
    """What a connection uses of the pump that opened it."""

    log: EventLog
    store: RunStore
    upstream: GooseUpstream
    lifecycle: RunLifecycle
    appender: FrameAppender
    session_id: str
    binding: SessionBinding

    async def write(self, frames: list[UpstreamFrame]) -> list[Event]:
        """Append `frames` (and empty the list); the events written."""

    async def active_runs(self) -> list[Run]: ...

    async def check_bound(self) -> None:
        """Raise when the stream moved to another session; else read its binding again."""

    async def fail(self, run: Run, error: str) -> None: ...

    async def start_lifetime(self) -> None:
        """goose restarted: the ids persisted so far are never sent again."""


class Connection:
    """:param header: the `Last-Event-ID` sent, or None.
    :param known: the newest goose id the log holds, or None.
    :param check_gap: whether ids skipping some after `known` mean events were lost.
    :param lost_run_grace: how long a run goose does not list may take to end.
    :param error_finish_grace: after an `Error`, how long goose's `Finish` may take.
    """

    def __init__(
        self,
        session: Session,
        *,
        header: int | None,
        known: int | None,
        check_gap: bool,
        lost_run_grace: float,
        error_finish_grace: float,
    ) -> None:
        self.session = session
        self.header = header
        self.known = known
        self.check_gap = check_gap
        self.lost_run_grace = lost_run_grace
        self.error_finish_grace = error_finish_grace
        self.listed: set[str] = set()  # the requests goose says are active

    async def consume(self, active: list[Run] | None) -> bool:
        """Read the connection; True when nothing is left to pump. `active`: the runs active
        just before, when known (a run started since is newer than the connection)."""
        session = self.session
        at_connect = await session.active_runs() if active is None else active
        session.appender.know(at_connect)
        async with session.upstream.events(session.session_id, self.header) as frames:
            reader = asyncio.create_task(self._read(frames))
            watchdog = asyncio.create_task(self._end_lost_runs(at_connect))
            try:
                await asyncio.wait({reader, watchdog}, return_when=asyncio.FIRST_COMPLETED)
                if watchdog.done() and not reader.done() and watchdog.result():
                    return True  # every active run was lost and ended: nothing to wait for
                return await reader
            finally:
                for task in (reader, watchdog):
                    task.cancel()
                await asyncio.gather(reader, watchdog, return_exceptions=True)

    async def _read(self, frames: GooseEventStream) -> bool:
        ahead = ReadAhead(frames)
        try:
            return await self._read_ahead(ahead)
        finally:
            await ahead.aclose()

    async def _read_ahead(self, ahead: ReadAhead) -> bool:
        session = self.session
        deadline: float | None = None  # set after an Error: wait this long for its Finish
        pending: list[UpstreamFrame] = []  # read, to be written together
        while True:
            if pending and not ahead.ready:
                await asyncio.sleep(0)  # let what has arrived meanwhile be parsed first
            if pending and not ahead.ready:
                async with ahead.paused():
                    await session.write(pending)  # nothing more has arrived: write what has
            timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                frames = await ahead.next_batch(timeout)
            except StopAsyncIteration:
                await session.write(pending)
                return False
            except TimeoutError:  # only while nothing is pending: it was written first
                if not await session.active_runs():
                    return True
                deadline = None
                continue
            except Exception:  # the connection failed: what it brought before still counts
                await session.write(pending)
                raise
            for frame in frames:
                if len(pending) >= MAX_BATCH:
                    async with ahead.paused():
                        await session.write(pending)
                if frame.id is None:  # a frame without a goose id (ActiveRequests) moves no cursor
                    if frame.type == ACTIVE_REQUESTS_TYPE:
                        self.listed.update(str(r) for r in frame.data.get("request_ids", []))
                    continue
                if not await self._place(frame, pending):
                    continue  # a replay of an event the log holds
                pending.append(frame)
                if frame.type not in (GOOSE_FINISH, GOOSE_ERROR):
                    continue
                event = (await session.write(pending))[-1]  # with what came before, at once
                run = await session.appender.run_for(frame.run_key)
                if run is None:
                    continue
                if frame.type == GOOSE_FINISH:
                    await session.lifecycle.upstream_finished(run, event)
                else:
                    await session.lifecycle.upstream_errored(run, event)
                    deadline = time.monotonic() + self.error_finish_grace
                await session.check_bound()  # a recovery may have moved the stream elsewhere
                if frame.type == GOOSE_FINISH and not await session.active_runs():
                    return True

    async def _place(self, frame: UpstreamFrame, pending: list[UpstreamFrame]) -> bool:
        """Check a frame's goose id against what the log holds; True, making it the newest,
        when the frame is new."""
        assert frame.id is not None
        known = self.known
        if known is not None and frame.id <= known:
            await self.session.write(pending)  # what the comparison reads must be written
            # goose replays only ids above the header within one lifetime; header-less,
            # an id it already gave must name the very same event.
            if self.header is None and await is_duplicate(
                self.session.log, self.session.binding, frame.id, frame.data
            ):
                return False
            raise GooseRestarted
        if self.check_gap and known is not None and frame.id > known + 1:
            await self.session.write(pending)
            await self._recover_conversation()
        self.check_gap = False
        self.known = frame.id
        return True

    async def _end_lost_runs(self, at_connect: list[Run]) -> bool:
        """Runs goose does not list after the reconnect, with no terminal event in time.

        After a header, a restarted goose replays nothing, so a run that finished there looks
        lost: the pump first looks again without the header, where content tells the lifetimes
        apart.
        """
        session = self.session
        await asyncio.sleep(self.lost_run_grace)
        lost: list[Run] = []
        for run in at_connect:
            if run.upstream_request_id in self.listed:
                continue
            current = await asyncio.to_thread(session.store.get, run.run_id)
            if current is None or not current.active or await session.log.arun_end(current.run_id):
                continue
            if current.upstream_request_id != run.upstream_request_id:
                continue  # a newer attempt, started after this connection: goose has it
            if self.header is not None:
                raise RecheckWithoutHeader
            lost.append(current)
        if lost:
            # goose forgetting an in-flight request means it restarted: from here on, the ids
            # persisted so far belong to its previous lifetime and are never sent again. The
            # new lifetime first ends the runs that waited for an approval, saying so.
            await session.start_lifetime()
            still = {run.run_id for run in await session.active_runs()}
            for run in lost:
                if run.run_id in still:
                    error = LOST_RUN_ERROR.format(request_id=run.upstream_request_id)
                    await session.fail(run, error)
        return not await session.active_runs()

    async def _recover_conversation(self) -> None:
        """Events fell out of goose's buffer; the session itself holds the conversation."""
        session = self.session
        try:
            goose_session = await session.upstream.get_session(session.session_id)
        except UpstreamError as exc:
            logger.warning("could not recover session %s: %s", session.session_id, exc)
            return
        active = await session.active_runs()
        await session.log.aappend(
            session.binding.stream,
            RECOVERED_TYPE,
            {
                "type": RECOVERED_TYPE,
                "conversation": goose_session.conversation or [],
                "recovered": True,
            },
            run_id=active[0].run_id if len(active) == 1 else None,
        )
