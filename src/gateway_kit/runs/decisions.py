"""What follows goose's `Finish` or `Error` for a run's current attempt (`RunDecisions`).

- goose's `Finish`: every `finish_guard` is asked. A veto starts a follow-up turn in the same
  goose session (`follow_ups.py`); after it the guards are asked again. Past `max_follow_ups`,
  or at once when a guard failed (raised, answered nonsense, did not answer in time: a
  `GuardFailure`), the run gets a `guard_failed` event and a warning in the log, then its
  `Finish`. A cancelled run ends without asking the guards.
- goose's `Error`, or an upstream failure: the error is classified by `classify_error`, and
  `plan_recovery` may answer a `RecoveryPlan`. Each kind of recovery runs at most its plan's
  `retries` times per run (once, by default); the previous goose request is cancelled first.
  A plan's `delay` is waited out without holding the run (`RunLifecycle.after_backoff`), so a
  cancel meanwhile ends it as cancelled. No plan, or a kind already spent: the run's `Error`.

The lifecycle (`lifecycle.py`) calls these holding the run's lock, and writes the run's end.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..bindings.goose_sessions import lifetime_head
from ..exceptions import RecoveryUsed, UpstreamError
from ..hooks import GuardVeto, RecoveryPlan
from ..log import Event
from ..log.event import ERROR, FINISH
from .events import FOLLOW_UP_STARTED, GUARD_FAILED, RECOVERY_STARTED
from .follow_ups import follow_up_prompt
from .model import Attempt, AttemptKind, Run, RunStatus
from .reading import RunEvents, read_all
from .tool_overrides import without_tools
from .vetoes import any_failed, flagged_finish, follow_up_started, guards_gave_up

if TYPE_CHECKING:
    from .lifecycle import RunLifecycle

logger = logging.getLogger(__name__)

RETRY_FAILED = "the recovery {kind!r} could not start: {error}"
RECOVERY_SPENT = "run %s: recovery %r was already used (%d time(s))"


@dataclass(frozen=True, slots=True)
class PendingRetry:
    """What a recovery attempt sends goose, once its backoff (if any) is over."""

    session_id: str
    prompt: str
    plan: RecoveryPlan
    error_class: str


class RunDecisions:
    """The decisions of `lifecycle`, which holds the run's lock while they are made."""

    def __init__(self, lifecycle: RunLifecycle) -> None:
        self.lifecycle = lifecycle
        self.log = lifecycle.log
        self.store = lifecycle.store
        self.upstream = lifecycle.upstream
        self.plugins = lifecycle.plugins
        self.settings = lifecycle.settings
        self.working_dir = lifecycle.working_dir

    async def finished(self, run: Run) -> None:
        """Decide after goose's Finish of the run's current request."""
        if run.cancel_requested:
            await self.lifecycle.end_run(run, FINISH, {"reason": "cancelled"}, RunStatus.CANCELLED)
            return
        vetoes = await self._ask_guards(run, RunEvents(self.log, run.run_id))
        if not vetoes:
            await self.lifecycle.end_run(run, FINISH, {"reason": "stop"}, RunStatus.FINISHED)
            return
        prompt, reasons, missing = follow_up_prompt(vetoes)
        attempts = await asyncio.to_thread(self.store.attempts, run.run_id)
        follow_ups = sum(1 for a in attempts if a.kind is AttemptKind.FOLLOW_UP)
        if follow_ups < self.settings.max_follow_ups and not any_failed(vetoes):
            await self._follow_up(run, prompt, reasons, missing)
            return
        failed = guards_gave_up(run.run_id, reasons, missing, follow_ups)
        before = [{"stream": run.stream, "type": GUARD_FAILED, "data": failed}]
        ending = flagged_finish({"reason": "stop"})
        await self.lifecycle.end_run(run, FINISH, ending, RunStatus.FINISHED, before=before)

    async def errored(self, run: Run, error: str) -> None:
        error_class: str | None = None
        if not run.cancel_requested:
            error_class = await self.plugins.classify_error(
                error, run, timeout=self.settings.hook_timeout
            )
        if error_class is not None:
            attempts = await asyncio.to_thread(self.store.attempts, run.run_id)
            plan = await self.plugins.plan_recovery(
                error_class, run, attempts, timeout=self.settings.hook_timeout
            )
            if plan is not None and await self._recover(run, error_class, plan, attempts):
                return
        data = {"error": error, "error_class": error_class}
        await self.lifecycle.end_run(run, ERROR, data, RunStatus.FAILED)

    async def _follow_up(
        self, run: Run, prompt: str, reasons: list[str], missing: list[str]
    ) -> None:
        request_id = str(uuid.uuid4())
        await self.lifecycle.cancel_current(run)
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
        started = follow_up_started(run.attempt, reasons, missing, prompt)
        await self.log.aappend(run.stream, FOLLOW_UP_STARTED, started, run_id=run.run_id)
        try:
            await self.lifecycle.reply(run.session_id, prompt, request_id)
        except UpstreamError as exc:
            await self.errored(run, f"the follow-up turn could not start: {exc}")

    async def _recover(
        self, run: Run, error_class: str, plan: RecoveryPlan, attempts: Sequence[Attempt]
    ) -> bool:
        """Start the plan's retry; False when its kind's budget is spent in this run."""
        tried = sum(1 for attempt in attempts if attempt.recovery == plan.kind)
        if tried >= plan.retries:
            logger.info(RECOVERY_SPENT, run.run_id, plan.kind, tried)
            return False
        await self.lifecycle.cancel_current(run)  # goose would refuse a second active request
        session_id = run.session_id
        prompt = plan.instructions
        if prompt is None:
            prompt = await asyncio.to_thread(self._prompt_of, run)
        try:
            if plan.clean_session:
                overrides = await self._extensions_for(run, plan)
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
                    recovery_try=tried + 1,
                    reason=error_class,
                )
            )
        except RecoveryUsed:
            logger.info(RECOVERY_SPENT, run.run_id, plan.kind, tried + 1)
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
            "recovery_try": tried + 1,
            "clean_session": plan.clean_session,
            "delay": plan.delay,
            "prompt": prompt,
        }
        await self.log.aappend(run.stream, RECOVERY_STARTED, started, run_id=run.run_id)
        retry = PendingRetry(session_id, prompt, plan, error_class)
        if plan.delay > 0:
            self.lifecycle.backoffs.start(run, plan.delay, retry)
        else:
            await self.send_retry(run, retry)
        return True

    async def send_retry(self, run: Run, retry: PendingRetry) -> None:
        """Send goose the retry `run`'s current attempt is (the caller holds the run's lock)."""
        plan = retry.plan
        context = [dict(message) for message in plan.context] if plan.context else None
        try:
            await self.lifecycle.reply(
                retry.session_id, retry.prompt, run.upstream_request_id,
                override_conversation=context,
            )  # fmt: skip
        except UpstreamError as exc:
            error = RETRY_FAILED.format(kind=plan.kind, error=exc)
            if plan.clean_session:
                # The new session never took its context: no retry could start from it.
                data = {"error": error, "error_class": retry.error_class}
                await self.lifecycle.end_run(run, ERROR, data, RunStatus.FAILED)
            else:
                await self.errored(run, error)  # a retry of its own, if its class has budget
            return
        if self.lifecycle.pumps is not None:
            self.lifecycle.pumps.ensure(retry.session_id)

    async def _extensions_for(self, run: Run, plan: RecoveryPlan) -> list[dict[str, Any]] | None:
        """The new session's `extension_overrides`: the plan's, or the failed session's
        extensions less the plan's `drop_tools` (read from goose)."""
        if plan.tool_policy is not None:
            return [dict(t) for t in plan.tool_policy]
        if plan.drop_tools is None:
            return None
        extensions = await self.upstream.session_extensions(run.session_id)
        tools = await self.upstream.session_tools(run.session_id)
        return without_tools(extensions, tools, plan.drop_tools)

    def _prompt_of(self, run: Run) -> str:
        """The prompt of the run's current attempt: a follow-up's or a recovery's, else the
        run's own message."""
        for event in reversed(
            read_all(self.log, run.run_id, (FOLLOW_UP_STARTED, RECOVERY_STARTED))
        ):
            prompt = event.data.get("prompt")
            if event.data.get("attempt") == run.attempt and isinstance(prompt, str) and prompt:
                return prompt
        return run.message

    async def _stopped_meanwhile(self, run: Run) -> None:
        """The run was cancelled (or ended) while its guards or planners were asked: no next
        attempt; a cancelled run ends as cancelled."""
        current = await asyncio.to_thread(self.store.get, run.run_id)
        if current is not None and current.active:
            await self.lifecycle.end_run(
                current, FINISH, {"reason": "cancelled"}, RunStatus.CANCELLED
            )

    async def _ask_guards(self, run: Run, events: Sequence[Event]) -> list[GuardVeto]:
        return await self.plugins.finish_guard(run, events, timeout=self.settings.hook_timeout)
