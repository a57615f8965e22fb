"""`RunLifecycle`: the one owner of a run's end.

The pump reports what goose said about the run's current attempt; the lifecycle decides what
follows, calling the plugins' hooks at their places:

- goose's `Finish`: every `finish_guard` is asked. A veto starts a follow-up turn in the same
  goose session, whose prompt names the vetoes' reasons and exactly their missing items; after
  it the guards are asked again. Past `max_follow_ups` the run gets a `guard_failed` event and
  a warning in the log, then its `Finish`. A cancelled run ends without asking the guards.
- goose's `Error`, or an upstream failure (goose lost the run, stayed unreachable): the error is
  classified by `classify_error`, and `plan_recovery` may answer a `RecoveryPlan`. Each kind of
  recovery runs at most once per run; the previous goose request is cancelled first. No plan,
  or a kind already spent: the run's `Error`.

The run's `Finish` or `Error` is appended in one transaction with the run's status and its
bill, at most once per run whatever several processes do; `bill_run` is then called through the
billing outbox. Hooks run in worker threads, each call within `hook_timeout`: a slow or raising
plugin holds up only its own run, and counts as having passed (a guard) or answered nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
import uuid
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from ..exceptions import RecoveryUsed, UpstreamError, UpstreamTimeout
from ..hooks import GuardVeto, Plugins, RecoveryPlan
from ..log import Event, EventLog
from ..log.event import ERROR, FINISH
from ..log.transaction import Transaction
from ..settings import (
    DEFAULT_CANCEL_DEADLINE,
    DEFAULT_MAX_RUN_DURATION,
    DEFAULT_REPLY_TIMEOUT,
    DEFAULT_WORKING_DIR,
    check_duration,
    check_seconds,
)
from .billing import BillingOutbox, BillingSettings
from .deadlines import RunDeadlines
from .ending import settle
from .events import (
    FOLLOW_UP_STARTED,
    GUARD_FAILED,
    RECOVERY_STARTED,
    UPSTREAM_ERROR,
    UPSTREAM_FINISH,
)
from .model import Attempt, AttemptKind, Run, RunStatus
from .ports import Pumps, Upstream
from .store import RunStore, lifetime_head, write_ending
from .usage import COUNTED, run_usage

logger = logging.getLogger("gateway_kit.runs")

READ_BATCH = 1000
STALE_FAILURE = "run %s: request %s was already replaced when it failed upstream: %s"
GUARD_FAILED_WARNING = "run %s: finish guards still vetoed after %d follow-up(s): %s"
FOLLOW_UP_PROMPT = "Your previous answer is not complete yet: {reasons}."
MISSING_LINE = "Still missing:\n{items}"
FOLLOW_UP_END = "Finish exactly these, then answer again."
RETRY_FAILED = "the recovery {kind!r} could not start: {error}"
NO_ANSWER = "goose did not answer {call} within {seconds:g} s"


@dataclass(frozen=True, slots=True)
class LifecycleSettings:
    """:param max_follow_ups: follow-up turns a run may get from finish guards' vetoes.
    :param hook_timeout: seconds one call of a lifecycle hook (`finish_guard`,
        `classify_error`, `plan_recovery`) may take; after that the run goes on without it.
    :param billing: timings of the billing outbox.
    :param reply_timeout: seconds goose's answer to a `reply` (or a `cancel`) may take; a run
        start past it fails with a 504.
    :param cancel_deadline: seconds after a cancel within which goose's `Finish` must come;
        after that the gateway ends the run as cancelled itself.
    :param max_run_duration: seconds a run may go on (``inf``: no limit); after that the
        gateway cancels goose's request and ends the run with an `Error` saying so.
    """

    max_follow_ups: int = 2
    hook_timeout: float = 30.0
    billing: BillingSettings = field(default_factory=BillingSettings)
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT
    cancel_deadline: float = DEFAULT_CANCEL_DEADLINE
    max_run_duration: float = DEFAULT_MAX_RUN_DURATION

    def __post_init__(self) -> None:
        if isinstance(self.max_follow_ups, bool) or not isinstance(self.max_follow_ups, int):
            raise ValueError(f"max_follow_ups must be an integer, got {self.max_follow_ups!r}")
        if self.max_follow_ups < 0:
            raise ValueError(f"max_follow_ups must not be negative, got {self.max_follow_ups}")
        if not self.hook_timeout > 0:
            raise ValueError(f"hook_timeout must be positive, got {self.hook_timeout!r}")
        check_seconds("reply_timeout", self.reply_timeout)
        check_seconds("cancel_deadline", self.cancel_deadline)
        check_duration("max_run_duration", self.max_run_duration)


def with_limits(
    settings: LifecycleSettings | None,
    *,
    reply_timeout: float | None = None,
    cancel_deadline: float | None = None,
    max_run_duration: float | None = None,
) -> LifecycleSettings:
    """`settings` (the defaults when None) with each limit given (not None) in its place."""
    base = settings or LifecycleSettings()
    return dataclasses.replace(
        base,
        reply_timeout=base.reply_timeout if reply_timeout is None else reply_timeout,
        cancel_deadline=base.cancel_deadline if cancel_deadline is None else cancel_deadline,
        max_run_duration=base.max_run_duration if max_run_duration is None else max_run_duration,
    )


def follow_up_prompt(vetoes: Sequence[GuardVeto]) -> tuple[str, list[str], list[str]]:
    """The follow-up's prompt, the vetoes' reasons and their missing items (each once)."""
    reasons = list(dict.fromkeys(veto.reason for veto in vetoes))
    missing = list(dict.fromkeys(item for veto in vetoes for item in veto.missing))
    parts = [FOLLOW_UP_PROMPT.format(reasons="; ".join(reasons))]
    if missing:
        parts.append(MISSING_LINE.format(items="\n".join(f"- {item}" for item in missing)))
    parts.append(FOLLOW_UP_END)
    return "\n\n".join(parts), reasons, missing


class RunLifecycle:
    def __init__(
        self,
        *,
        log: EventLog,
        store: RunStore,
        upstream: Upstream,
        plugins: Plugins | None = None,
        settings: LifecycleSettings | None = None,
        working_dir: str = DEFAULT_WORKING_DIR,
    ) -> None:
        self.log = log
        self.store = store
        self.upstream = upstream
        self.plugins = plugins if plugins is not None else Plugins(load_entry_points=False)
        self.settings = settings or LifecycleSettings()
        self.working_dir = working_dir
        self.billing = BillingOutbox(store, self.plugins, self.settings.billing)
        self.pumps: Pumps | None = None  # set by the pumps that report to this lifecycle
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.deadlines = RunDeadlines(self)

    # --- what the pump reports ---------------------------------------------------------------

    async def upstream_finished(self, run: Run, event: Event) -> None:
        """goose's `Finish` for one of the run's requests was appended as `event`."""
        async with self._lock(run.run_id):
            current = await asyncio.to_thread(self._current, run, event)
            if current is not None:
                await self._finished(current)

    async def upstream_errored(self, run: Run, event: Event) -> None:
        """goose's `Error` for one of the run's requests was appended as `event`."""
        async with self._lock(run.run_id):
            current = await asyncio.to_thread(self._current, run, event)
            if current is not None:
                await self._errored(current, str(event.data.get("error", "")))

    async def upstream_failed(self, run: Run, error: str) -> None:
        """`run`'s request failed upstream without an `Error` event of goose's. `run` is as the
        reporter last read it: a failure of an attempt that a newer one has replaced since (a
        follow-up or a recovery decided meanwhile) is about a request nobody waits for."""
        async with self._lock(run.run_id):
            current = await asyncio.to_thread(self.store.get, run.run_id)
            if current is None or not current.active:
                return
            if current.upstream_request_id != run.upstream_request_id:
                logger.info(STALE_FAILURE, run.run_id, run.upstream_request_id, error)
                return
            await self._errored(current, error)

    async def resume(self, run: Run) -> bool:
        """A pump starts on the run's session: finish a decision a stopped process left; True
        when the run was ended or moved on here.

        The current attempt's `Finish` or `Error` may be in the log without the run's end (the
        process that appended it died before deciding): decide now. A run whose end is in the
        log but not in its row (a process died between the two, before they were written
        together) gets its row brought in line.
        """
        async with self._lock(run.run_id):
            current, settled, ends = await asyncio.to_thread(self._look_back, run.run_id)
            if current is None or settled:
                return settled
            for event in ends:
                if event.data.get("chat_request_id") != current.upstream_request_id:
                    continue
                # The first of them decides, as it did live: goose's Finish follows its Error.
                if event.type == UPSTREAM_ERROR:
                    await self._errored(current, str(event.data.get("error", "")))
                    return True
                if event.type == UPSTREAM_FINISH:
                    await self._finished(current)
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
            settle(self.store, current, terminal)
            return current, True, []
        return current, False, read_all(self.log, run_id, (UPSTREAM_ERROR, UPSTREAM_FINISH))

    # --- decisions ---------------------------------------------------------------------------

    async def _finished(self, run: Run) -> None:
        """Decide after goose's Finish of the run's current request."""
        if run.cancel_requested:
            await self._end(run, FINISH, {"reason": "cancelled"}, RunStatus.CANCELLED)
            return
        vetoes = await self._ask_guards(run, RunEvents(self.log, run.run_id))
        if not vetoes:
            await self._end(run, FINISH, {"reason": "stop"}, RunStatus.FINISHED)
            return
        prompt, reasons, missing = follow_up_prompt(vetoes)
        attempts = await asyncio.to_thread(self.store.attempts, run.run_id)
        follow_ups = sum(1 for a in attempts if a.kind is AttemptKind.FOLLOW_UP)
        if follow_ups < self.settings.max_follow_ups:
            await self._follow_up(run, prompt, reasons, missing)
            return
        logger.warning(GUARD_FAILED_WARNING, run.run_id, follow_ups, "; ".join(reasons))
        failed = {
            "type": GUARD_FAILED,
            "reasons": reasons,
            "missing": missing,
            "follow_ups": follow_ups,
        }
        before = [{"stream": run.stream, "type": GUARD_FAILED, "data": failed}]
        await self._end(run, FINISH, {"reason": "stop"}, RunStatus.FINISHED, before=before)

    async def _errored(self, run: Run, error: str) -> None:
        error_class: str | None = None
        if not run.cancel_requested:
            error_class = await self._ask("classify_error", error=error, run=run)
        if error_class is not None:
            attempts = await asyncio.to_thread(self.store.attempts, run.run_id)
            plan = await self._ask(
                "plan_recovery", error_class=error_class, run=run, attempts=attempts
            )
            if plan is not None and await self._recover(run, error_class, plan, attempts):
                return
        data = {"error": error, "error_class": error_class}
        await self._end(run, ERROR, data, RunStatus.FAILED)

    async def _follow_up(
        self, run: Run, prompt: str, reasons: list[str], missing: list[str]
    ) -> None:
        request_id = str(uuid.uuid4())
        await self._cancel_current(run)
        following = await asyncio.to_thread(
            lambda: self.store.add_attempt(
                run,
                request_id=request_id,
                session_id=run.session_id,
                kind=AttemptKind.FOLLOW_UP,
                reason="; ".join(reasons),
            )
        )
        if following is None:
            await self._stopped_meanwhile(run)
            return
        run = following
        started = {"attempt": run.attempt, "reasons": reasons, "missing": missing, "prompt": prompt}
        await self.log.aappend(run.stream, FOLLOW_UP_STARTED, started, run_id=run.run_id)
        try:
            await self.reply(run.session_id, prompt, request_id)
        except UpstreamError as exc:
            await self._errored(run, f"the follow-up turn could not start: {exc}")

    async def _recover(
        self, run: Run, error_class: str, plan: RecoveryPlan, attempts: Sequence[Attempt]
    ) -> bool:
        """Start the plan's retry; False when its kind was already spent in this run."""
        if any(attempt.recovery == plan.kind for attempt in attempts):
            logger.info("run %s: recovery %r was already used", run.run_id, plan.kind)
            return False
        await self._cancel_current(run)  # goose would refuse a second active request
        session_id = run.session_id
        try:
            if plan.clean_session:
                policy = plan.tool_policy
                overrides = None if policy is None else [dict(t) for t in policy]
                session = await self.upstream.start_session(
                    self.working_dir, extension_overrides=overrides
                )
                session_id = session.id
        except UpstreamError as exc:
            logger.warning(RETRY_FAILED.format(kind=plan.kind, error=exc))
            return False
        request_id = str(uuid.uuid4())
        try:
            retrying = await asyncio.to_thread(
                lambda: self.store.add_attempt(
                    run,
                    request_id=request_id,
                    session_id=session_id,
                    kind=AttemptKind.RECOVERY,
                    recovery=plan.kind,
                    reason=error_class,
                )
            )
        except RecoveryUsed:
            logger.info("run %s: recovery %r was already used", run.run_id, plan.kind)
            return False
        if retrying is None:
            await self._stopped_meanwhile(run)
            return True
        run = retrying
        if plan.clean_session:
            # From here on the conversation lives in the new session; goose ids of the old
            # one are never sent to it.
            head = await lifetime_head(self.log, run.stream)
            await asyncio.to_thread(self.store.rebind, run.stream, session_id, head)
        started = {
            "attempt": run.attempt,
            "error_class": error_class,
            "recovery": plan.kind,
            "clean_session": plan.clean_session,
        }
        await self.log.aappend(run.stream, RECOVERY_STARTED, started, run_id=run.run_id)
        context = [dict(message) for message in plan.context] if plan.context else None
        try:
            await self.reply(
                session_id,
                plan.instructions or run.message,
                request_id,
                override_conversation=context,
            )
        except UpstreamError as exc:
            error = RETRY_FAILED.format(kind=plan.kind, error=exc)
            data = {"error": error, "error_class": error_class}
            await self._end(run, ERROR, data, RunStatus.FAILED)
            return True
        if plan.clean_session and self.pumps is not None:
            self.pumps.ensure(session_id)
        return True

    async def _stopped_meanwhile(self, run: Run) -> None:
        """The run was cancelled (or ended) while its guards or planners were asked: no next
        attempt; a cancelled run ends as cancelled."""
        current = await asyncio.to_thread(self.store.get, run.run_id)
        if current is not None and current.active:
            await self._end(current, FINISH, {"reason": "cancelled"}, RunStatus.CANCELLED)

    async def reply(
        self,
        session_id: str,
        text: str,
        request_id: str,
        *,
        override_conversation: list[dict[str, Any]] | None = None,
    ) -> None:
        """goose's `reply`, answered within `reply_timeout` (`UpstreamTimeout` past it): goose
        answers at once and works in the background, so a longer wait means a goose that hangs."""
        seconds = self.settings.reply_timeout
        try:
            async with asyncio.timeout(seconds):
                await self.upstream.reply(
                    session_id, text, request_id, override_conversation=override_conversation
                )
        except TimeoutError:
            call = f"the reply {request_id}"
            raise UpstreamTimeout(NO_ANSWER.format(call=call, seconds=seconds)) from None

    def cancel_soon(self, run: Run) -> None:
        """Cancel the run's current goose request in the background (a reply that timed out
        may have reached goose after all: nobody would read what it does)."""
        task = asyncio.create_task(self._cancel_current(run), name="gateway-kit-cancel")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _cancel_current(self, run: Run) -> None:
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

    async def _end(
        self,
        run: Run,
        type: str,
        data: dict[str, Any],
        status: RunStatus,
        *,
        before: Sequence[dict[str, Any]] = (),
    ) -> Event | None:
        """Append the run's terminal event, with its status and bill, unless it has ended."""
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
        lock = self._lock(run.run_id)
        if lock.locked():
            return None  # being decided here (its guards, say): not hanging on goose
        async with lock:
            current = await asyncio.to_thread(self.store.get, run.run_id)
            if current is None or not current.active:
                return None
            return await self._end(current, type, data, status)

    async def end_unstarted(self, run: Run, error: str) -> Event | None:
        """End a run goose never took (its `reply` was refused) with an `Error`."""
        async with self._lock(run.run_id):
            data = {"error": error, "error_class": None}
            return await self._end(run, ERROR, data, RunStatus.FAILED)

    # --- helpers -----------------------------------------------------------------------------

    def _lock(self, run_id: str) -> asyncio.Lock:
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

    async def _ask_guards(self, run: Run, events: Sequence[Event]) -> list[GuardVeto]:
        return vetoes_of(await self._ask("finish_guard", run=run, events=events))

    async def _ask(self, hook: str, **arguments: Any) -> Any:
        if not self.plugins.implements(hook):
            return None
        try:
            return await self.plugins.call_in_thread(
                hook, timeout=self.settings.hook_timeout, **arguments
            )
        except TimeoutError:
            return None

    # --- life of the process -----------------------------------------------------------------

    async def start(self) -> None:
        await self.billing.start()
        self.deadlines.start()

    async def stop(self) -> None:
        await self.billing.stop()
        await self.deadlines.stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def vetoes_of(answers: Any) -> list[GuardVeto]:
    return [answer for answer in answers or () if isinstance(answer, GuardVeto)]


def read_all(log: EventLog, run_id: str, types: Collection[str] = ()) -> list[Event]:
    """Every committed event of the run (of `types`, if given), oldest first: its writers have
    committed what is decided on, which a reader by cursor may not be given yet."""
    events: list[Event] = []
    while True:
        after = events[-1].seq if events else 0
        batch = log.read(after, None, READ_BATCH, run_id=run_id, types=types, settled=False)
        events.extend(batch)
        if len(batch) < READ_BATCH:
            return events


class RunEvents(Sequence[Event]):
    """A run's events as the finish guards get them: read when a guard first looks, in the
    guard's thread, once for all of them; a guard that never looks costs no read."""

    def __init__(self, log: EventLog, run_id: str) -> None:
        self._log = log
        self._run_id = run_id
        self._events: list[Event] | None = None
        self._lock = threading.Lock()

    def _loaded(self) -> list[Event]:
        with self._lock:
            if self._events is None:
                self._events = read_all(self._log, self._run_id)
            return self._events

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Event]: ...
    def __getitem__(self, index: int | slice) -> Event | Sequence[Event]:
        return self._loaded()[index]

    def __len__(self) -> int:
        return len(self._loaded())

    def __iter__(self) -> Iterator[Event]:
        return iter(self._loaded())

    def __repr__(self) -> str:
        return f"RunEvents({self._run_id!r})"
