"""`RunDecisions`: what follows goose's `Finish` or `Error` for the current attempt of a run the
gateway drives, carried out.

The facts are gathered here: on goose's `Finish`, every `finish_guard` is asked (not for a
cancelled run); on goose's `Error` or an upstream failure, `classify_error`, then
`plan_recovery` for a class. `decide` (`ending.py`) says what follows, and it is done here:

- the run's end, written with its status and bill (`end_writer.py`);
- a follow-up turn in the same goose session: the previous request is cancelled, the attempt
  recorded, `FollowUpStarted` appended, and goose told what is missing;
- a recovery: the previous request is cancelled, a new goose session started if the plan says
  so, the attempt recorded (each try of a kind once, whichever process plans it) and
  `RecoveryStarted` appended; its reply is sent at once, or after the plan's `delay`
  (`backoffs.py`) without holding the run, so that a cancel meanwhile ends it as cancelled.

A run cancelled while its hooks were asked gets no next attempt: it ends as cancelled. The
caller (`RunLifecycle`) holds the run's lock.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from ..bindings.goose_sessions import lifetime_head
from ..exceptions import RecoveryUsed, UpstreamError
from ..hooks import Plugins, RecoveryPlan
from ..log import EventLog
from .async_store import AsyncRunStore, run_events
from .backoffs import PendingRetry, RetryBackoffs
from .end_writer import EndWriter
from .ending import (
    CANCELLED,
    Decision,
    End,
    Facts,
    Failed,
    Finished,
    FollowUp,
    Retry,
    decide,
    failed,
    follow_ups_of,
    tries_of,
)
from .events import FOLLOW_UP_STARTED, RECOVERY_STARTED
from .lifecycle_settings import LifecycleSettings
from .model import AttemptKind, Run
from .ports import Pumps, Upstream
from .reading import RunEvents
from .tool_overrides import without_tools
from .upstream_calls import UpstreamCalls
from .vetoes import follow_up_started

logger = logging.getLogger(__name__)

RETRY_FAILED = "the recovery {kind!r} could not start: {error}"
RECOVERY_SPENT = "run %s: recovery %r was already used (%d time(s))"
FOLLOW_UP_FAILED = "the follow-up turn could not start: {error}"


class RunDecisions:
    """:param log: the log the runs' events are read from and appended to.
    :param runs: the runs and their attempts.
    :param upstream: goose, for the sessions of recoveries that start afresh.
    :param plugins: whose lifecycle hooks are asked.
    :param settings: `max_follow_ups` and `hook_timeout`.
    :param working_dir: where a new goose session works.
    :param calls: goose's `reply` and `cancel`.
    :param ends: where a run's end is written.
    :param backoffs: where a retry with a delay waits.
    """

    def __init__(
        self,
        *,
        log: EventLog,
        runs: AsyncRunStore,
        upstream: Upstream,
        plugins: Plugins,
        settings: LifecycleSettings,
        working_dir: str,
        calls: UpstreamCalls,
        ends: EndWriter,
        backoffs: RetryBackoffs,
    ) -> None:
        self.log = log
        self.runs = runs
        self.upstream = upstream
        self.plugins = plugins
        self.settings = settings
        self.working_dir = working_dir
        self.calls = calls
        self.ends = ends
        self.backoffs = backoffs
        self.pumps: Pumps | None = None  # the pumps that copy a retry's session into the log

    async def finished(self, run: Run) -> None:
        """Decide after goose's `Finish` of the run's current request."""
        if run.cancel_requested:  # ends as cancelled whatever the guards would say
            await self._carry_out(run, decide(Facts(Finished(), cancelled=True)))
            return
        vetoes = await self.plugins.finish_guard(
            run, RunEvents(self.log, run.run_id), timeout=self.settings.hook_timeout
        )
        follow_ups = follow_ups_of(await self.runs.attempts(run.run_id)) if vetoes else 0
        limit = self.settings.max_follow_ups
        facts = Facts(Finished(), vetoes=vetoes, follow_ups=follow_ups, max_follow_ups=limit)
        await self._carry_out(run, decide(facts))

    async def errored(self, run: Run, error: str) -> None:
        """Decide after goose's `Error` of the run's current request, or its failure upstream."""
        facts = Facts(Failed(error), cancelled=run.cancel_requested)
        if not run.cancel_requested:
            timeout = self.settings.hook_timeout
            error_class = await self.plugins.classify_error(error, run, timeout=timeout)
            if error_class is not None:
                attempts = await self.runs.attempts(run.run_id)
                plan = await self.plugins.plan_recovery(error_class, run, attempts, timeout=timeout)
                tried = 0 if plan is None else tries_of(attempts, plan.kind)
                facts = Facts(Failed(error), error_class=error_class, plan=plan, tried=tried)
        decision = decide(facts)
        if facts.plan is not None and isinstance(decision, End):
            logger.info(RECOVERY_SPENT, run.run_id, facts.plan.kind, facts.tried)
        await self._carry_out(run, decision)

    async def _carry_out(self, run: Run, decision: Decision) -> None:
        if isinstance(decision, FollowUp):
            await self._follow_up(run, decision)
        elif isinstance(decision, Retry):
            if not await self._retry(run, decision):
                await self.ends.write(run, decision.instead)
        else:
            await self.ends.write(run, decision)

    async def _follow_up(self, run: Run, follow_up: FollowUp) -> None:
        request_id = str(uuid.uuid4())
        await self.calls.cancel(run)
        following = await self.runs.add_attempt(
            run,
            request_id=request_id,
            session_id=run.session_id,
            kind=AttemptKind.FOLLOW_UP,
            reason="; ".join(follow_up.reasons),
        )
        if following is None:
            await self._stopped_meanwhile(run)
            return
        run = following
        started = follow_up_started(
            run.attempt, follow_up.reasons, follow_up.missing, follow_up.prompt
        )
        await self.log.aappend(run.stream, FOLLOW_UP_STARTED, started, run_id=run.run_id)
        try:
            await self.calls.reply(run.session_id, follow_up.prompt, request_id)
        except UpstreamError as exc:
            await self.errored(run, FOLLOW_UP_FAILED.format(error=exc))

    async def _retry(self, run: Run, retry: Retry) -> bool:
        """Start the retry; False when it could not start (the run then ends)."""
        plan = retry.plan
        await self.calls.cancel(run)  # goose would refuse a second active request
        session_id = run.session_id
        prompt = plan.instructions or await self._prompt_of(run)
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
            retrying = await self.runs.add_attempt(
                run,
                request_id=request_id,
                session_id=session_id,
                kind=AttemptKind.RECOVERY,
                recovery=plan.kind,
                recovery_try=retry.try_number,
                reason=retry.error_class,
            )
        except RecoveryUsed:
            logger.info(RECOVERY_SPENT, run.run_id, plan.kind, retry.try_number)
            return False
        if retrying is None:
            await self._stopped_meanwhile(run)
            return True
        run = retrying
        if plan.clean_session:
            # From here on the conversation lives in the new session; goose ids of the old
            # one are never sent to it.
            head = await lifetime_head(self.log, run.stream)
            await self.runs.rebind(run.stream, session_id, head)
        started = {
            "attempt": run.attempt,
            "error_class": retry.error_class,
            "recovery": plan.kind,
            "recovery_try": retry.try_number,
            "clean_session": plan.clean_session,
            "delay": retry.delay,
            "prompt": prompt,
        }
        await self.log.aappend(run.stream, RECOVERY_STARTED, started, run_id=run.run_id)
        pending = PendingRetry(session_id, prompt, plan, retry.error_class)
        if retry.delay > 0:
            self.backoffs.start(run, retry.delay, pending)
        else:
            await self.send_retry(run, pending)
        return True

    async def send_retry(self, run: Run, retry: PendingRetry) -> None:
        """Send goose the retry `run`'s current attempt is (the caller holds the run's lock)."""
        plan = retry.plan
        context = [dict(message) for message in plan.context] if plan.context else None
        try:
            await self.calls.reply(
                retry.session_id, retry.prompt, run.upstream_request_id,
                override_conversation=context,
            )  # fmt: skip
        except UpstreamError as exc:
            error = RETRY_FAILED.format(kind=plan.kind, error=exc)
            if plan.clean_session:
                # The new session never took its context: no retry could start from it.
                await self.ends.write(run, failed(error, retry.error_class))
            else:
                await self.errored(run, error)  # a retry of its own, if its class has budget
            return
        if self.pumps is not None:
            self.pumps.ensure(retry.session_id)

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

    async def _prompt_of(self, run: Run) -> str:
        """The prompt of the run's current attempt: a follow-up's or a recovery's, else the
        run's own message."""
        started = await run_events(self.log, run.run_id, (FOLLOW_UP_STARTED, RECOVERY_STARTED))
        for event in reversed(started):
            prompt = event.data.get("prompt")
            if event.data.get("attempt") == run.attempt and isinstance(prompt, str) and prompt:
                return prompt
        return run.message

    async def _stopped_meanwhile(self, run: Run) -> None:
        """The run was cancelled (or ended) while its guards or planners were asked: no next
        attempt; a cancelled run ends as cancelled."""
        current = await self.runs.get(run.run_id)
        if current is not None and current.active:
            await self.ends.write(current, CANCELLED)
