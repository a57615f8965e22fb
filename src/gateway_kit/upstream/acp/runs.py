"""`AcpRuns`: the gateway's runs on an ACP agent, through the ports runs use
(`gateway_kit.runs.ports`: the upstream, and the pumps that copy a session's events).

A run's attempt is one ``session/prompt`` (`AcpTurn`, under the attempt's request id). goose
answers a reply at once and its events are read by a pump; an ACP prompt is answered when the
turn is over and its updates arrive on the connection meanwhile. So `reply` starts the turn in a
task and returns, and the turn's events go, in the order the agent sent them, through a queue
(the connection's reading task only puts them there) to a writer that appends them under the
run. The turn's ``Finish`` or ``Error`` is stored as goose's ends of a request are, and reported
to the run lifecycle, which ends the run (or starts its next attempt) exactly as for goose.

A session the agent still runs a prompt in refuses another one (goose: "session already has
active run"): the agent says so at once, so `reply` waits a moment (`ACCEPT_WINDOW`, ended by the
turn's first event) to turn that refusal into `SessionBusy`, the gateway's 409, as goose's busy
session is. It is sent again for `busy_wait`, after a ``session/cancel`` for the prompt the
gateway abandoned (one whose agent ignored a cancel past its deadline).

Permission requests become the approvals goose's tool confirmations are: the turn writes the
request as goose's ``actionRequired`` ``toolConfirmation`` item (its id the tool call's), which
the approvals' watcher (`gateway_kit.upstream.watchers.PumpWatcher`) sees written and records,
and the request waits for the approval's answer (`decide`, through `ApprovalAnswers`), which
selects the agent's option of that kind. The tool call's end (its ``toolResponse``) proves the
answer arrived. A turn cancelled, or an agent gone, answers or drops the request itself.

Session ids are the gateway's own: ``acp:<the agent's id>``, so that a stream bound to an ACP
session is never taken for one bound to goose's (goose and ACP agents both number sessions by
date, and goose hands ids out again after a delete). Before each prompt the session is loaded
again if the agent process was restarted; what ``session/load`` replays is not the turn's and
is not written again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from ...coordination.tasks import TaskSet
from ...exceptions import SessionBusy, UpstreamError
from ...log import EventLog
from ...runs.lifecycle import RunLifecycle
from ...runs.store import RunStore
from ..appends import FrameAppender
from ..frames import UpstreamFrame
from ..watchers import PumpWatcher
from .errors import AcpRequestError, AcpSessionBusy
from .keeping import RunKeeping
from .permissions import (
    ALLOW_ALWAYS,
    ALLOW_ONCE,
    REJECT_ALWAYS,
    REJECT_ONCE,
    PermissionRequest,
)
from .translate import ERROR, FINISH, MESSAGE, TranslatedEvent, error_event
from .turn import AcpTurn
from .upstream import AcpUpstream

logger = logging.getLogger(__name__)

SESSION_PREFIX = "acp:"
BUSY = "session {session_id} already has a prompt running"
NOT_ACP = "{session_id!r} is not a session of an ACP upstream"
NOT_ATTACHED = "AcpRuns was not attached to a log, run store and lifecycle"
MAX_BATCH = 200  # events written in one transaction at most
# How long `reply` waits for the agent to refuse the prompt (it does so at once) before it
# takes the prompt as accepted; the turn's first event ends the wait sooner.
ACCEPT_WINDOW = 0.5
# How long a stopping gateway waits for its turns' ends to be written and decided: local
# writes, not the agent (which is stopped first), so a busy database is what it waits out.
STOP_WRITE_GRACE = 10.0
# The action an approval tells the agent (`gateway_kit.approvals.model`) → the option's kind.
OPTION_OF_ACTION = {
    "allow_once": ALLOW_ONCE,
    "always_allow": ALLOW_ALWAYS,
    "deny_once": REJECT_ONCE,
    "deny": REJECT_ONCE,
    "always_deny": REJECT_ALWAYS,
}
NO_TURN = "permission asked in session %s outside any turn of the gateway: rejected"


def session_key(agent_session_id: str) -> str:
    """The gateway's id of the agent's session."""
    return f"{SESSION_PREFIX}{agent_session_id}"


def is_acp_session(session_key: str) -> bool:
    return session_key.startswith(SESSION_PREFIX)


def agent_session(session_key: str) -> str:
    """The agent's id of the gateway's session."""
    if not session_key.startswith(SESSION_PREFIX):
        raise UpstreamError(NOT_ACP.format(session_id=session_key))
    return session_key[len(SESSION_PREFIX) :]


@dataclass(frozen=True, slots=True)
class StartedSession:
    id: str


@dataclass(slots=True)
class _Running:
    """One turn going on: its attempt's request id, and the events not written yet."""

    request_id: str
    events: asyncio.Queue[TranslatedEvent] = field(default_factory=asyncio.Queue)
    started: asyncio.Event = field(default_factory=asyncio.Event)  # an event, or the end
    refused: AcpSessionBusy | None = None  # the agent runs another prompt in the session
    turn: AcpTurn = field(init=False)


class AcpRuns:
    """The `Upstream` and `Pumps` of runs on an `AcpUpstream` (see the module docstring).

    `attach` hands it the log, the run store and the lifecycle its turns write to and report
    to, once the composition has built them.
    """

    def __init__(self, upstream: AcpUpstream) -> None:
        self.upstream = upstream
        self._parts: tuple[EventLog, RunStore, RunLifecycle] | None = None
        self._running: dict[str, _Running] = {}
        self._asked: dict[tuple[str, str], asyncio.Future[str]] = {}
        self._watcher: PumpWatcher | None = None
        self._keeping: RunKeeping | None = None
        self._tasks = TaskSet()

    def attach(
        self,
        *,
        log: EventLog,
        store: RunStore,
        lifecycle: RunLifecycle,
        watcher: PumpWatcher | None = None,
        keeping: RunKeeping | None = None,
    ) -> None:
        self._parts = (log, store, lifecycle)
        self._watcher = watcher
        self._keeping = keeping

    def _attached(self) -> tuple[EventLog, RunStore, RunLifecycle]:
        if self._parts is None:
            raise RuntimeError(NOT_ATTACHED)
        return self._parts

    # --- the upstream port ----------------------------------------------------------------

    async def start_session(
        self, working_dir: str, *, extension_overrides: list[dict[str, Any]] | None = None
    ) -> StartedSession:
        """A new session of the agent, in the agent's working directory (`AcpUpstream`'s
        ``cwd``): the gateway's default working directory is goose's, not the agent's. The
        agent chooses its own tools: `extension_overrides` are goose's and are left out."""
        session = await self.upstream.new_session()
        return StartedSession(session_key(session.id))

    async def session_extensions(self, session_id: str) -> list[dict[str, Any]]:
        return []

    async def session_tools(self, session_id: str) -> list[dict[str, Any]]:
        return []

    async def reply(
        self,
        session_id: str,
        text: str,
        request_id: str,
        *,
        override_conversation: list[dict[str, Any]] | None = None,
    ) -> object:
        """Start the prompt of attempt `request_id` and return; `SessionBusy` while the
        session has one running. The turn writes its events itself (see the module)."""
        log, store, lifecycle = self._attached()
        agent_id = agent_session(session_id)
        if session_id in self._running or self.upstream.prompting(agent_id):
            raise SessionBusy(409, BUSY.format(session_id=agent_id))
        running = _Running(request_id)
        running.turn = AcpTurn(
            self.upstream,
            agent_id,
            emit=functools.partial(self._emitted, session_id, running),
            request_id=request_id,
        )
        self._running[session_id] = running
        driving = self._tasks.start(self._drive(running, text), name="gateway-kit-acp-turn")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(running.started.wait(), ACCEPT_WINDOW)
        if running.refused is not None:
            await driving
            raise SessionBusy(409, str(running.refused)) from running.refused
        self._tasks.start(
            self._write(session_id, running, log, store, lifecycle), name="gateway-kit-acp-write"
        )
        if self._keeping is not None:
            await self._keeping.keep(request_id)
        return None

    async def cancel(self, session_id: str, request_id: str) -> None:
        """Cancel the turn of attempt `request_id`, if it is the one going on (the cancel of an
        attempt that has ended must not stop the next)."""
        running = self._running.get(session_id)
        if running is None:
            # None of the gateway's prompts runs there: what the agent may still run is one
            # the gateway abandoned, which holds the session busy for the next.
            await self.upstream.cancel(agent_session(session_id))
        elif running.request_id == request_id:
            await running.turn.cancel()

    async def aclose(self) -> None:
        await self.stop()
        await self.upstream.aclose()

    # --- permissions, as approvals -------------------------------------------------------

    async def permission(self, request: PermissionRequest) -> str | None:
        """The `AcpUpstream` permission handler: the request written as an approval asks, and
        answered with the option the approval's answer selects."""
        key = session_key(request.session_id)
        running = self._running.get(key)
        if running is None:
            logger.warning(NO_TURN, request.session_id)
            return REJECT_ONCE
        asked = (key, request.tool_call_id)
        answer = self._asked[asked] = asyncio.get_running_loop().create_future()
        running.events.put_nowait(confirmation(request, running.request_id))
        try:
            return OPTION_OF_ACTION.get(await answer)  # an unknown action: cancelled
        finally:
            if self._asked.get(asked) is answer:
                del self._asked[asked]

    def decide(self, session_id: str, tool_call_id: str, action: str) -> bool:
        """Answer the permission request the tool call waits for; False when none waits (it
        was answered, cancelled, or its agent is gone): nothing is sent then."""
        answer = self._asked.get((session_id, tool_call_id))
        if answer is None or answer.done():
            return False
        answer.set_result(action)
        return True

    # --- the pumps port: a turn writes its own events --------------------------------------

    def ensure(self, session_id: str) -> None:
        """Nothing to do: the turn started by `reply` writes the session's events."""

    async def start(self) -> None:
        """Start looking for runs whose process died mid-turn (`RunKeeping`)."""
        if self._keeping is not None:
            await self._keeping.start()

    async def stop(self) -> None:
        """Stop the agent, so that the turns going on end with an `Error` that is written and
        reported (a run is never left active by a gateway that stopped); then stop what is
        left after `STOP_WRITE_GRACE`."""
        if self._running:
            await self.upstream.aclose()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._tasks.wait_idle(), STOP_WRITE_GRACE)
        await self._tasks.stop()
        if self._keeping is not None:
            await self._keeping.stop()

    # --- a turn ------------------------------------------------------------------------------

    def _emitted(self, session_id: str, running: _Running, event: TranslatedEvent) -> None:
        """Called from the connection's reading task: queue only."""
        if event.type in (FINISH, ERROR) and self._running.get(session_id) is running:
            # The prompt is over: the next attempt (a follow-up the lifecycle decides on this
            # very event) may start before this one's events are all written.
            del self._running[session_id]
        running.events.put_nowait(event)
        running.started.set()

    async def _drive(self, running: _Running, text: str) -> None:
        turn = running.turn
        try:
            await turn.run(text)
        except AcpSessionBusy as exc:  # the agent's own "a run exists"
            if not running.started.is_set():  # `reply` is still waiting: it refuses the run
                running.refused = exc
                self._forget(running)
                running.started.set()
                return
            turn.emit(error_event(str(exc), turn.state, rpc_error=exc.to_json()))
        except Exception as exc:  # a turn always ends with an event, whatever failed
            logger.exception("the turn of request %s failed", running.request_id)
            rpc_error = exc.to_json() if isinstance(exc, AcpRequestError) else None
            turn.emit(error_event(str(exc) or repr(exc), turn.state, rpc_error=rpc_error))
        except asyncio.CancelledError:
            turn.emit(error_event("the gateway stopped during the turn", turn.state))
            raise

    def _forget(self, running: _Running) -> None:
        for key, value in list(self._running.items()):
            if value is running:
                del self._running[key]

    async def _write(
        self,
        session_id: str,
        running: _Running,
        log: EventLog,
        store: RunStore,
        lifecycle: RunLifecycle,
    ) -> None:
        """Append the turn's events as they come; report its end to the lifecycle."""
        appender = FrameAppender(log, store)
        binding = await asyncio.to_thread(store.binding_of_session, session_id)
        if binding is None:
            logger.error("session %s serves no stream: its turn is not written", session_id)
            return
        ended = False
        while not ended:
            batch = [await running.events.get()]
            while len(batch) < MAX_BATCH and not running.events.empty():
                batch.append(running.events.get_nowait())
            frames = []
            for event in batch:
                frames.append(UpstreamFrame(None, event.type, event.data, running.request_id))
                if event.type in (FINISH, ERROR):
                    ended = True
                    break  # a turn has one end: nothing after it is its
            written = await appender.append_all(binding.stream, frames)
            if self._watcher is not None:
                await self._watcher.written(binding, frames, written)
            if not ended:
                continue
            run = await appender.run_for(running.request_id)
            if run is None:
                logger.warning("no run made request %s: its end is lost", running.request_id)
            elif frames[-1].type == FINISH:
                await lifecycle.upstream_finished(run, written[-1])
            else:
                await lifecycle.upstream_errored(run, written[-1])


def confirmation(request: PermissionRequest, request_id: str) -> TranslatedEvent:
    """The permission request as goose's tool confirmation, the raw request kept beside it."""
    raw: dict[str, Any] = {"toolCall": request.tool_call, "options": request.options}
    item = {
        "type": "actionRequired",
        "data": {
            "actionType": "toolConfirmation",
            "id": request.tool_call_id,
            "toolName": request.tool_name,
            "arguments": request.arguments,
            "prompt": request.tool_call.get("title"),
        },
    }
    message = {
        "id": f"permission_{request.tool_call_id}",
        "role": "assistant",
        "created": int(time.time()),
        "content": [item],
        "metadata": {"userVisible": True, "agentVisible": True},
    }
    data = {
        "type": MESSAGE,
        "message": message,
        "chat_request_id": request_id,
        "acp": {"requestPermission": raw},
    }
    return TranslatedEvent(MESSAGE, data)
