"""The session pump: reads one goose session's events, appends each to the log, and reports
what goose said about a run to the run lifecycle.

One pump per goose session, owned by the gateway, never by a client connection, and only in the
process that holds the session's lease. The pump decides nothing about a run's end: frames
become appends (`appends.py`), goose's `Finish`, `Error` and upstream failures go to the
lifecycle (`gateway_kit.runs.lifecycle`), which ends the run or starts its next attempt. The
translator (`translator.py`) decides what is sent back as `Last-Event-ID`. The pump ends when
the session has no active run. Each connection to goose is read by a `Connection`
(`connection.py`); the pump decides what follows its end. What it does when goose misbehaves:

- any reconnection is made without the header, since goose may have restarted meanwhile;
  replayed events the log holds are recognised by content;
- goose restarted (an id at or below one already persisted, on a connection that sent a header,
  or naming different content): a new goosed lifetime begins at the log's head, so the old ids
  are never sent again;
- "Client too far behind": never copied into the log; reconnect without the header, skip what
  the log holds, and if events were lost, append the conversation from `GET /sessions/{id}`;
- a run goose no longer knows (not in `ActiveRequests` after a reconnect, and no terminal event
  within the grace period) is reported as failed: the upstream lost it;
- a connection that brings nothing new and ends (goose closed it, cut it mid-frame, or could
  not be reached) is a failure: the next one waits a pause that doubles with each failure in a
  row (jittered, up to `max_reconnect_delay`), and after `max_failures` of them in a row, or
  `upstream_down_timeout` after the first, the active runs are reported as failed, saying why;
- goose unreachable: wait for `/status`, on the same clock, and after `upstream_down_timeout`
  report the active runs as failed, so no client is left on "running…";
- the stream moved to another goose session (a recovery in a clean session): stop.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...bindings.goose_sessions import SessionBinding, lifetime_head
from ...coordination.keepalive import LeaseKeeper
from ...coordination.leases import Lease, LeaseLost
from ...exceptions import (
    UpstreamHTTPError,
    UpstreamTooFarBehind,
    UpstreamUnavailable,
)
from ...log import Event, EventLog
from ...runs.lifecycle import RunLifecycle
from ...runs.model import Run
from ...runs.store import RunStore
from ..appends import FrameAppender
from ..backoff import Streak
from ..frames import UpstreamFrame
from ..pump_settings import PumpSettings
from ..watchers import PumpWatcher
from .client import GooseUpstream
from .connection import Connection, GooseRestarted, RecheckWithoutHeader
from .translator import ResumePlan, plan_resume

logger = logging.getLogger(__name__)

UNREACHABLE_ERROR = "the upstream stayed unreachable for {seconds:g} s; the run was abandoned"
CUT_STREAM_ERROR = (
    "goose kept cutting its event stream: {count} connection(s) in a row over {seconds:.1f} s "
    "brought nothing new (the last: {error}); the run was abandoned"
)
CLOSED_EMPTY = "goose closed the event stream"


class Unbound(Exception):
    """The stream this session served moved to another session."""


class SessionPump:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        upstream: GooseUpstream,
        session_id: str,
        lease: Lease,
        settings: PumpSettings,
        lifecycle: RunLifecycle,
        watcher: PumpWatcher | None = None,
    ) -> None:
        self.log = log
        self.store = store
        self.upstream = upstream
        self.session_id = session_id
        self.binding = SessionBinding(stream="", session_id=session_id, lifetime_start_seq=0)
        self.lease = lease
        self.settings = settings
        self.lifecycle = lifecycle
        self.appender = FrameAppender(log, store)
        self.written = 0  # events this pump appended: a connection that adds none brought nothing
        self.watcher = watcher

    async def run(self) -> bool:
        """Pump until nothing is left; False when another process holds the session's lease."""
        binding = await asyncio.to_thread(self._claim)
        if binding is None:
            return False  # an unknown session, or another process pumps it
        self.binding = binding
        keeper = LeaseKeeper(
            self.lease, f"goose session {self.session_id}", logger=logger, retake=True
        )
        try:
            async with keeper.kept():
                await self._pump()
        except LeaseLost:
            logger.warning("pump for goose session %s lost its lease", self.session_id)
            return False
        except Unbound:
            logger.info("goose session %s no longer serves its stream", self.session_id)
        finally:
            try:
                await asyncio.to_thread(self.lease.release)
            except Exception:  # it runs out by itself; another process may take it then
                logger.exception("releasing the lease of goose session %s failed", self.session_id)
        return True

    def _plan(self) -> ResumePlan:
        return plan_resume(self.log, self.binding, self.store.latest_run(self.session_id))

    def _claim(self) -> SessionBinding | None:
        """The session's binding, once its lease is this pump's; None when it has neither."""
        binding = self.store.binding_of_session(self.session_id)
        if binding is None or not self.lease.acquire():
            return None
        return binding

    async def _pump(self) -> None:
        # Only a pump's first connection sends a header. After any drop goose may have
        # restarted, and an id of its previous lifetime must never be sent: reconnections go
        # header-less, recognise replayed events by content and notice lost ones by the gap.
        first = True
        streak = Streak(self.settings.reconnect_delay, self.settings.max_reconnect_delay)
        if self.watcher is not None:
            await self.watcher.pump_started(self.binding, await self.active_runs())
        while True:
            if not first:  # the first look is the one `run` made just before
                await self.check_bound()
            runs = await self.active_runs()
            moved = [await self.lifecycle.resume(run) for run in runs]
            active = None if any(moved) else runs  # a run that moved on: look again at connect
            plan = await asyncio.to_thread(self._plan)
            if not plan.connect and not await self.active_runs():
                return  # the log already ends the latest run: goose is not contacted
            header = plan.last_event_id if first else None
            check_gap, first = not first, False
            written, opened = self.written, time.monotonic()
            failure: Exception | None = None
            connection = Connection(
                self,
                header=header,
                known=plan.newest_persisted,
                check_gap=check_gap,
                lost_run_grace=self.settings.lost_run_grace,
                error_finish_grace=self.settings.error_finish_grace,
            )
            try:
                if await connection.consume(active):
                    return
            except RecheckWithoutHeader:
                continue
            except GooseRestarted as exc:
                logger.warning("goose restarted under session %s; new lifetime", self.session_id)
                await self.start_lifetime()
                failure = exc
            except UpstreamTooFarBehind as exc:
                failure = exc
            except UpstreamUnavailable as exc:
                logger.info("goose session %s unreachable: %s", self.session_id, exc)
                failure = exc
            except UpstreamHTTPError as exc:  # e.g. goose no longer knows the session
                logger.error("goose refused the events of session %s: %s", self.session_id, exc)
                for run in await self.active_runs():
                    await self.fail(run, f"the upstream refused the session's events: {exc}")
                return
            sound = self.written > written or (
                time.monotonic() - opened >= self.settings.stable_connection
            )
            if sound:
                streak.reset()
            if sound and failure is None:
                await asyncio.sleep(self.settings.reconnect_delay)  # goose closed the stream
                continue
            streak.failed(CLOSED_EMPTY if failure is None else str(failure) or repr(failure))
            if not await self._within_limits(streak):
                return
            await asyncio.sleep(streak.pause())
            if isinstance(failure, UpstreamUnavailable) and not await self._wait_for_goose(streak):
                return

    async def _within_limits(self, streak: Streak) -> bool:
        """False, once the session's runs are ended, when the connections failed too often or
        for too long in a row."""
        settings = self.settings
        if streak.count < settings.max_failures and streak.elapsed < settings.upstream_down_timeout:
            return True
        error = CUT_STREAM_ERROR.format(
            count=streak.count, seconds=streak.elapsed, error=streak.last_error
        )
        logger.error("goose session %s: %s", self.session_id, error)
        for run in await self.active_runs():
            await self.fail(run, error)
        return False

    async def _wait_for_goose(self, streak: Streak) -> bool:
        """Wait until goose answers `/status`; False, once the session's runs are ended, when
        it stays down past `upstream_down_timeout` from the streak's first failure."""
        settings = self.settings
        delay = settings.reconnect_delay
        while True:
            remaining = settings.upstream_down_timeout - streak.elapsed
            try:
                # Past the clock, goose still gets one look of its own before it is given up.
                async with asyncio.timeout(max(remaining, settings.max_reconnect_delay)):
                    if await self.upstream.status():
                        return True
            except TimeoutError:
                pass
            remaining = settings.upstream_down_timeout - streak.elapsed
            if remaining <= 0:
                break
            await asyncio.sleep(min(delay, remaining))
            delay = min(delay * 2, settings.max_reconnect_delay)
        error = UNREACHABLE_ERROR.format(seconds=settings.upstream_down_timeout)
        logger.error("goose session %s: %s", self.session_id, error)
        for run in await self.active_runs():
            await self.fail(run, error)
        return False

    # --- what a connection uses (`connection.Session`) -------------------------------------

    async def write(self, frames: list[UpstreamFrame]) -> list[Event]:
        """Append `frames` (and empty the list); the events written."""
        if not frames:
            return []
        if not self.lease.held:
            raise LeaseLost
        events = await self.appender.append_all(self.binding.stream, frames)
        written = list(frames) if self.watcher is not None else []
        frames.clear()
        self.written += len(events)
        if written:
            await self.watcher.written(self.binding, written, events)  # type: ignore[union-attr]
        return events

    async def check_bound(self) -> None:
        binding = await asyncio.to_thread(self.store.binding_of_session, self.session_id)
        if binding is None:
            raise Unbound
        self.binding = binding

    async def active_runs(self) -> list[Run]:
        return await asyncio.to_thread(self.store.active_runs, self.session_id)

    async def fail(self, run: Run, error: str) -> None:
        if not self.lease.held:
            raise LeaseLost
        await self.lifecycle.upstream_failed(run, error)

    async def start_lifetime(self) -> None:
        head = await lifetime_head(self.log, self.binding.stream)
        ended = (
            {} if self.watcher is None else await self.watcher.lifetime_ended(self.binding, head)
        )
        await asyncio.to_thread(self.store.start_lifetime, self.session_id, head)
        await self.check_bound()  # the binding now names the new lifetime
        for run in await self.active_runs():
            if run.run_id in ended:
                await self.fail(run, ended[run.run_id])
