"""`RunLifecycle`: the one owner of a run's end.

The pump reports what goose said about the run's current attempt; the lifecycle decides what
follows (`decisions.py`: finish guards and follow-ups, error classes and recoveries), one
decision at a time per run, and writes the run's end. A decision, once reported, is carried to
its end in a task of the lifecycle's own: the reporter may be cancelled meanwhile (a connection
to goose torn down while it reads, its pump stopping), and a decision cut off half-way (a
recovery's attempt recorded, its retry never sent) would leave the run stranded.

The run's `Finish` or `Error` is appended in one transaction with the run's status and its
bill, at most once per run whatever several processes do; `bill_run` is then called through the
billing outbox. Hooks run in worker threads, each call within `hook_timeout`: a slow or raising
plugin holds up only its own run, and counts as having passed (a guard) or answered nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from ..coordination.tasks import TaskSet
from ..exceptions import UpstreamError, UpstreamTimeout
from ..hooks import Plugins
from ..log import Event, EventLog
from ..log.event import ERROR
from ..log.transaction import Transaction
from ..settings import DEFAULT_WORKING_DIR
from .backoffs import RetryBackoffs
from .billing import BillingOutbox
from .busy import reply_when_free, still_wanted
from .deadlines import RunDeadlines
from .decisions import RunDecisions
from .events import UPSTREAM_ERROR, UPSTREAM_FINISH
from .lifecycle_settings import LifecycleSettings
from .model import Run, RunStatus
from .ports import Pumps, Upstream
from .reading import read_all
from .store import RunStore, write_ending
from .usage import COUNTED, run_usage

logger = logging.getLogger(__name__)

STALE_FAILURE = "run %s: request %s was already replaced when it failed upstream: %s"
NOT_SENT_YET = "run %s: request %s waits out its backoff, goose has not got it yet: %s"
NO_ANSWER = "goose did not answer {call} within {seconds:g} s"

T = TypeVar("T")


class RunLifecycle:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        upstream: Upstream,
        plugins: Plugins,
        settings: LifecycleSettings | None = None,
        working_dir: str = DEFAULT_WORKING_DIR,
    ) -> None:
        self.log = log
        self.store = store
        self.upstream = upstream
        self.plugins = plugins  # the gateway's own: its hooks, thread pools and hung-call limits
        self.settings = settings or LifecycleSettings()
        self.working_dir = working_dir
        self.billing = BillingOutbox(store, self.plugins, self.settings.billing)
        self.pumps: Pumps | None = None  # set by the pumps that report to this lifecycle
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks = TaskSet()
        self.deadlines = RunDeadlines(self)
        self.decisions = RunDecisions(self)
        self.backoffs = RetryBackoffs(self)

    # --- what the pump reports ---------------------------------------------------------------

    async def upstream_finished(self, run: Run, event: Event) -> None:
        """goose's `Finish` for one of the run's requests was appended as `event`."""
        await self._carried(self._finished(run, event))

    async def _finished(self, run: Run, event: Event) -> None:
        async with self.lock(run.run_id):
            current = await asyncio.to_thread(self._current, run, event)
            if current is not None:
                await self.decisions.finished(current)

    async def upstream_errored(self, run: Run, event: Event) -> None:
        """goose's `Error` for one of the run's requests was appended as `event`."""
        await self._carried(self._errored(run, event))

    async def _errored(self, run: Run, event: Event) -> None:
        async with self.lock(run.run_id):
            current = await asyncio.to_thread(self._current, run, event)
            if current is not None:
                await self.decisions.errored(current, str(event.data.get("error", "")))

    async def upstream_failed(self, run: Run, error: str) -> None:
        """`run`'s request failed upstream without an `Error` event of goose's. `run` is as the
        reporter last read it: a failure of an attempt that a newer one has replaced since (a
        follow-up or a recovery decided meanwhile) is about a request nobody waits for."""
        await self._carried(self._failed(run, error))

    async def _failed(self, run: Run, error: str) -> None:
        async with self.lock(run.run_id):
            current = await asyncio.to_thread(self.store.get, run.run_id)
            if current is None or not current.active:
                return
            if current.upstream_request_id != run.upstream_request_id:
                logger.info(STALE_FAILURE, run.run_id, run.upstream_request_id, error)
                return
            if self.backoffs.pending(run.run_id):
                logger.info(NOT_SENT_YET, run.run_id, run.upstream_request_id, error)
                return
            await self.decisions.errored(current, error)

    async def resume(self, run: Run) -> bool:
        """A pump starts on the run's session: finish a decision a stopped process left; True
        when the run was ended or moved on here.

        The current attempt's `Finish` or `Error` may be in the log without the run's end (the
        process that appended it died before deciding): decide now. A run whose end is in the
        log but not in its row (a process died between the two, before they were written
        together) gets its row brought in line, and goose is asked to drop its request: nobody
        reads what it does any more.
        """
        return await self._carried(self._resume(run))

    async def _resume(self, run: Run) -> bool:
        async with self.lock(run.run_id):
            current, settled, ends = await asyncio.to_thread(self._look_back, run.run_id)
            if current is not None and settled:
                self.cancel_soon(current)
            if current is None or settled:
                return settled
            for event in ends:
                if event.data.get("chat_request_id") != current.upstream_request_id:
                    continue
                # The first of them decides, as it did live: goose's Finish follows its Error.
                if event.type == UPSTREAM_ERROR:
                    await self.decisions.errored(current, str(event.data.get("error", "")))
                    return True
                if event.type == UPSTREAM_FINISH:
                    await self.decisions.finished(current)
                    return True
            return False

    def _look_back(self, run_id: str) -> tuple[Run | None, bool, list[Event]]:
        """The run if active; whether its row was just brought in line with the end the log
        holds; goose's ends of its requests, when the log holds none of the run's own."""
        current = self.store.get(run_id)
        if current is None or not current.active:
            return None, False, []
        terminal = self.log.run_end(run_id)
        if terminal is not None:
            self.store.settle(current, terminal)
            return current, True, []
        return current, False, read_all(self.log, run_id, (UPSTREAM_ERROR, UPSTREAM_FINISH))

    async def reply(
        self,
        session_id: str,
        text: str,
        request_id: str,
        *,
        override_conversation: list[dict[str, Any]] | None = None,
        release: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """goose's `reply`, each try answered within `reply_timeout` (`UpstreamTimeout` past
        it): goose answers at once and works in the background, so a longer wait means a goose
        that hangs. A reply refused because the session is busy is sent again within
        `busy_wait` (`busy.py`), after `release()` has asked goose to drop what may still hold
        the session."""
        seconds = self.settings.reply_timeout

        async def send() -> None:
            try:
                async with asyncio.timeout(seconds):
                    await self.upstream.reply(
                        session_id, text, request_id, override_conversation=override_conversation
                    )
            except TimeoutError:
                call = f"the reply {request_id}"
                raise UpstreamTimeout(NO_ANSWER.format(call=call, seconds=seconds)) from None

        await reply_when_free(
            send,
            busy_wait=self.settings.busy_wait,
            wanted=lambda: still_wanted(self.store, request_id),
            release=release,
        )

    def cancel_soon(self, run: Run) -> None:
        """Cancel the run's current goose request in the background (a reply that timed out
        may have reached goose after all: nobody would read what it does)."""
        self._tasks.start(self.cancel_current(run), name="gateway-kit-cancel")

    async def cancel_current(self, run: Run) -> None:
        request_id = run.upstream_request_id
        try:
            async with asyncio.timeout(self.settings.reply_timeout):
                await self.upstream.cancel(run.session_id, request_id)
        except TimeoutError:
            seconds = self.settings.reply_timeout
            call = f"the cancel of request {request_id}"
            logger.warning(NO_ANSWER.format(call=call, seconds=seconds))
        except UpstreamError as exc:  # goose answers 200 even for an unknown request
            logger.warning("cancelling request %s failed: %s", request_id, exc)

    async def end_run(
        self,
        run: Run,
        type: str,
        data: dict[str, Any],
        status: RunStatus,
        *,
        before: Sequence[dict[str, Any]] = (),
    ) -> Event | None:
        """Append the run's terminal event, with its status and bill, unless it has ended; the
        caller holds the run's lock."""
        ended = await asyncio.to_thread(self._end_now, run, type, data, status, before)
        if ended is not None:
            self.billing.deliver_soon(run.run_id)
        return ended

    def _end_now(
        self,
        run: Run,
        type: str,
        data: dict[str, Any],
        status: RunStatus,
        before: Sequence[dict[str, Any]],
    ) -> Event | None:
        usage = run_usage(read_all(self.log, run.run_id, COUNTED), run.attempt)
        body = {"type": type, **data, "status": status.value, "attempts": run.attempt}
        body["usage"] = usage
        # This process delivers the bill at once; a scan elsewhere takes over only if it has
        # not been delivered by the time a claim of this process would have run out.
        others_from = time.time() + self.settings.billing.claim_ttl

        def also(transaction: Transaction, written: list[Event]) -> None:
            write_ending(transaction, run, status, usage, others_from=others_from)

        return self.log.end_run(run.stream, type, body, run_id=run.run_id, before=before, also=also)

    async def end_overdue(
        self, run: Run, type: str, data: dict[str, Any], status: RunStatus
    ) -> Event | None:
        """End a run the gateway stopped waiting for (`RunDeadlines`), unless it has ended."""
        lock = self.lock(run.run_id)
        if lock.locked():
            return None  # being decided here (its guards, say): not hanging on goose
        async with lock:
            current = await asyncio.to_thread(self.store.get, run.run_id)
            if current is None or not current.active:
                return None
            return await self.end_run(current, type, data, status)

    async def end_unstarted(self, run: Run, error: str) -> Event | None:
        """End a run goose never took (its `reply` was refused) with an `Error`."""
        async with self.lock(run.run_id):
            data = {"error": error, "error_class": None}
            return await self.end_run(run, ERROR, data, RunStatus.FAILED)

    async def settle_ended(self, run: Run) -> bool:
        """True when the log already ends the run; its row, if still active, is brought in line
        and goose asked to drop its request (which would keep the session busy for the next).

        Rows written before a run's end was written with its terminal event (or by a process
        that died between the two) can say active for a run the log has ended.
        """
        terminal = await self.log.arun_end(run.run_id)
        if terminal is None:
            return False
        if await asyncio.to_thread(self.store.settle, run, terminal):
            await self.cancel_current(run)
        return True

    # --- helpers -----------------------------------------------------------------------------

    async def _carried(self, decision: Coroutine[Any, Any, T]) -> T:
        """Run `decision` to its end whatever happens to the caller: a cancelled caller stops
        waiting, the decision goes on holding the run's lock (only `stop` cancels it)."""
        task = self._tasks.start(decision, name="gateway-kit-decision")
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            task.add_done_callback(_log_failure)  # nobody waits for it any more to hear it
            raise

    def lock(self, run_id: str) -> asyncio.Lock:
        lock = self._locks.get(run_id)
        if lock is None:
            lock = self._locks[run_id] = asyncio.Lock()
        if len(self._locks) > 10_000:  # forget the locks of runs nobody is deciding about
            for key in [k for k, v in self._locks.items() if not v.locked() and k != run_id]:
                del self._locks[key]
        return lock

    def _current(self, run: Run, event: Event) -> Run | None:
        """The run as it is now, if `event` is about its current attempt and it is active."""
        current = self.store.get(run.run_id)
        if current is None or not current.active:
            return None
        if event.data.get("chat_request_id", current.upstream_request_id) != (
            current.upstream_request_id
        ):
            return None  # a late event of an attempt that was cancelled or superseded
        return current

    # --- life of the process -----------------------------------------------------------------

    async def start(self) -> None:
        await self.billing.start()
        self.deadlines.start()

    async def stop(self) -> None:
        await self.backoffs.stop()
        await self.billing.stop()
        await self.deadlines.stop()
        await self._tasks.stop()


def _log_failure(task: asyncio.Task[Any]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("a run decision failed after its reporter stopped", exc_info=task.exception())
