"""The finish guards of the runs an app writes itself, asked as the run lifecycle asks them.

    with owned_run(log, stream=..., guards=gateway.run_guards, follow_up=another_turn) as run:
        ...  # the app's turn

When the app's turn ends (its block is left normally; a `Finish` the block appends is held back
until then), the gateway's `finish_guard` plugins are asked, with the run and its events, in the
plugins' lifecycle threads and within the lifecycle's `hook_timeout`. A veto calls
``follow_up(prompt)`` in the app's thread: the app runs another turn of the same run, told
exactly what is missing (`follow_up_prompt`), after a `FollowUpStarted` event; then the guards
are asked again. Past `max_follow_ups`, with no `follow_up` to call, or at once when a guard
raised or did not answer in time (logged; it checked nothing), the run gets a
`guard_failed` event and a warning in the log, then its `Finish` flagged ``"guard_failed":
true``. What follows a turn is decided by the rules of the gateway's own runs
(`gateway_kit.runs.ending.decide`), and written as they are (`gateway_kit.runs.vetoes`).

The guards are asked through the call the lifecycle makes (`Plugins.finish_guard`: the
plugins' lifecycle threads, `hook_timeout`), a coroutine. The app's thread (a Flask worker, a
script) runs no event loop, so the call gets one of its own while it lasts. The gateway's loop
is not borrowed: an owned run may be written where no gateway serves (a worker process, a
script). Only a caller already on an event loop's thread has the call made from a thread of
its own, since that loop is blocked by the run (as any owned run blocks its thread).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..hooks import GuardVeto, Plugins
from ..log import Event, EventLog
from ..log.event import FINISH
from ..runs import ending
from ..runs.events import FOLLOW_UP_STARTED
from ..runs.lifecycle_settings import LifecycleSettings
from ..runs.model import RunStatus
from ..runs.reading import RunEvents
from ..runs.vetoes import flagged_finish, follow_up_started, guard_failed_before

# follow_up(prompt): the app's next turn of the same run, in the thread that wrote the last.
FollowUp = Callable[[str], None]
# append(type, data) and end(type, data, before) of the run the guards hold.
Append = Callable[[str, Mapping[str, Any]], object]
End = Callable[[str, Mapping[str, Any], Sequence[Mapping[str, Any]]], object]

DEFAULTS = LifecycleSettings()


@dataclass(frozen=True, slots=True)
class GuardedRun:
    """An owned run as its finish guards see it (what the hook's `run` has at least)."""

    run_id: str
    stream: str
    attempt: int  # the app's turns so far: 1, then one more per follow-up
    owner: str | None  # the user the run is written for, when the app named one
    status: RunStatus = RunStatus.ACTIVE


@dataclass(frozen=True, slots=True)
class RunGuards:
    """The finish guards an app's runs are held to: `plugins`' `finish_guard`s, each call
    within `hook_timeout` seconds, and at most `max_follow_ups` follow-up turns per run.
    `Gateway.run_guards` is its plugins with its lifecycle's settings."""

    plugins: Plugins
    max_follow_ups: int = DEFAULTS.max_follow_ups
    hook_timeout: float = DEFAULTS.hook_timeout

    def __post_init__(self) -> None:
        LifecycleSettings(max_follow_ups=self.max_follow_ups, hook_timeout=self.hook_timeout)

    @classmethod
    def of(cls, plugins: Plugins, settings: LifecycleSettings) -> RunGuards:
        return cls(plugins, settings.max_follow_ups, settings.hook_timeout)

    @property
    def any(self) -> bool:
        """Whether any plugin implements `finish_guard` (else nothing is asked or held back)."""
        return bool(self.plugins.hook.finish_guard.get_hookimpls())

    def vetoes(self, run: GuardedRun, events: Sequence[Event]) -> list[GuardVeto]:
        """Every guard's veto, asked from this (the app's) thread as the lifecycle asks them
        (see the module docstring)."""

        def ask() -> list[GuardVeto]:
            return asyncio.run(self.plugins.finish_guard(run, events, timeout=self.hook_timeout))

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return ask()
        # Called on an event loop's thread: the guards get a loop of their own in another.
        answer: list[list[GuardVeto]] = []
        thread = threading.Thread(target=lambda: answer.append(ask()), name="gateway-kit-guards")
        thread.start()
        thread.join()
        if not answer:
            raise RuntimeError("the finish guards could not be asked")
        return answer[0]


class TurnGuards:
    """The guards of one owned run: what its app's turn ended with, and its turns so far."""

    def __init__(
        self,
        guards: RunGuards,
        follow_up: FollowUp | None,
        *,
        log: EventLog,
        run_id: str,
        stream: str,
        owner: str | None,
    ) -> None:
        self.guards = guards
        self.follow_up = follow_up
        self.log = log
        self.run_id = run_id
        self.stream = stream
        self.owner = owner
        self.attempt = 1
        self.turn_ended = False  # the app's current turn appended its Finish (held back)
        self.finish: dict[str, Any] = {}

    def hold(self, data: Mapping[str, Any] | None) -> None:
        """Hold back the `Finish` the app's turn appended: the guards decide after its block."""
        finish = dict(data or {})
        # Refused now, as an append of it would be, rather than when the block ends.
        self.log.check(
            stream=self.stream, type=FINISH, data=flagged_finish(finish), run_id=self.run_id
        )
        self.turn_ended, self.finish = True, finish

    def settle(self, append: Append, end: End, ended: Callable[[], bool]) -> None:
        """End the run as its guards decide (`decide`, as for the gateway's runs), once the
        app's turn has ended; `ended()` says whether a follow-up turn ended the run itself
        (with an `Error`)."""
        follow_ups = 0
        while True:
            run = GuardedRun(self.run_id, self.stream, self.attempt, self.owner)
            facts = ending.Facts(
                ending.Finished(self.finish),
                vetoes=self.guards.vetoes(run, RunEvents(self.log, self.run_id)),
                follow_ups=follow_ups,
                max_follow_ups=self.guards.max_follow_ups,
                can_follow_up=self.follow_up is not None,
            )
            decision = ending.decide(facts)
            if not isinstance(decision, ending.FollowUp):
                assert isinstance(decision, ending.End), "a finished turn is never retried"
                before = guard_failed_before(self.run_id, self.stream, decision.guard_failed)
                end(decision.type, decision.data, before)
                return
            assert self.follow_up is not None  # decided only when it can be called
            follow_ups += 1
            self.attempt += 1
            self.turn_ended = False
            started = follow_up_started(
                self.attempt, decision.reasons, decision.missing, decision.prompt
            )
            append(FOLLOW_UP_STARTED, started)
            self.follow_up(decision.prompt)
            if ended():
                return
