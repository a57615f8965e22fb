"""What follows goose's `Finish` or `Error` for a run's current attempt (`RunDecisions`).

- goose's `Finish`: every `finish_guard` is asked. A veto starts a follow-up turn in the same
  goose session (`follow_ups.py`); after it the guards are asked again. Past `max_follow_ups`
  the run gets a `guard_failed` event and a warning in the log, then its `Finish`. A cancelled
  run ends without asking the guards.
- goose's `Error`, or an upstream failure: the error is classified by `classify_error`, and
  `plan_recovery` may answer a `RecoveryPlan`. Each kind of recovery runs at most once per run;
  the previous goose request is cancelled first. No plan, or a kind already spent: the run's
  `Error`.

The lifecycle (`lifecycle.py`) calls these holding the run's lock, and writes the run's end.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..exceptions import RecoveryUsed, UpstreamError
from ..hooks import GuardVeto, RecoveryPlan
from ..log import Event
from ..log.event import ERROR, FINISH
from .bindings import lifetime_head
from .events import FOLLOW_UP_STARTED, GUARD_FAILED, RECOVERY_STARTED
from .follow_ups import follow_up_prompt
from .model import Attempt, AttemptKind, Run, RunStatus
from .reading import RunEvents

if TYPE_CHECKING:
    from .lifecycle import RunLifecycle

logger = logging.getLogger("gateway_kit.runs")

GUARD_FAILED_WARNING = "run %s: finish guards still vetoed after %d follow-up(s): %s"
RETRY_FAILED = "the recovery {kind!r} could not start: {error}"


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
        # A client that reads only the run's end must not take it for a plain success.
        ending = {"reason": "stop", "guard_failed": True}
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
        started = {"attempt": run.attempt, "reasons": reasons, "missing": missing, "prompt": prompt}
        await self.log.aappend(run.stream, FOLLOW_UP_STARTED, started, run_id=run.run_id)
        try:
            await self.lifecycle.reply(run.session_id, prompt, request_id)
        except UpstreamError as exc:
            await self.errored(run, f"the follow-up turn could not start: {exc}")

    async def _recover(
        self, run: Run, error_class: str, plan: RecoveryPlan, attempts: Sequence[Attempt]
    ) -> bool:
        """Start the plan's retry; False when its kind was already spent in this run."""
        if any(attempt.recovery == plan.kind for attempt in attempts):
            logger.info("run %s: recovery %r was already used", run.run_id, plan.kind)
            return False
        await self.lifecycle.cancel_current(run)  # goose would refuse a second active request
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
            await self.lifecycle.reply(
                session_id,
                plan.instructions or run.message,
                request_id,
                override_conversation=context,
            )
        except UpstreamError as exc:
            error = RETRY_FAILED.format(kind=plan.kind, error=exc)
            data = {"error": error, "error_class": error_class}
            await self.lifecycle.end_run(run, ERROR, data, RunStatus.FAILED)
            return True
        if plan.clean_session and self.lifecycle.pumps is not None:
            self.lifecycle.pumps.ensure(session_id)
        return True

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
