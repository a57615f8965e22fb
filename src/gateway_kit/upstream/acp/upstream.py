"""`AcpUpstream`: an agent that speaks the Agent Client Protocol, as the gateway's upstream.

``AcpUpstream(command=["goose", "acp"])`` runs the agent as a child process over stdio;
``AcpUpstream(url="ws://127.0.0.1:3284/acp", secret_key=...)`` reaches one served over
WebSocket (``goose serve``). Either way the agent is reached at first use, kept up by a
supervisor that restarts it with backoff, and stopped by `aclose`.

Sessions: `new_session` (in `mode` when one is given: goose asks permission only in its
``approve`` modes), and a session the current agent process has not opened (it was restarted)
is loaded again with ``session/load`` before its next prompt, when the agent offers it; the
history it replays reaches listeners marked `replay`. `prompt` returns the stop reason;
`cancel` sends ``session/cancel``, answers the session's pending permission requests
``cancelled``, and the prompt returns within `cancel_deadline` even if the agent never answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import acp

from ...exceptions import SettingsError, UpstreamTimeout
from ...types import JSONObject
from .connection import AgentConnection
from .errors import INVALID_PARAMS, AcpSessionBusy, AcpSessionLost
from .links import Link, StdioLink, WebSocketLink
from .permissions import PermissionHandler, PermissionRequest, deny
from .supervisor import Supervisor
from .target import AgentTarget, StdioAgent, agent_target
from .translate import CANCELLED, stop_reason
from .updates import Listener, UpdateRouter

logger = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_CANCEL_DEADLINE = 10.0
DEFAULT_START_TIMEOUT = 60.0  # starting an agent loads its model and extensions
START_MARGIN = 5.0  # to spawn the process, and to stop one that did not answer in time
DEFAULT_REQUEST_TIMEOUT = 120.0  # session/new, session/load, session/set_mode
DEFAULT_RESTART_DELAY = 0.5
DEFAULT_MAX_RESTART_DELAY = 30.0
DEFAULT_STABLE_AFTER = 30.0
DEFAULT_STOP_GRACE = 2.0
DEFAULT_MAX_MESSAGE_BYTES = 50 * 1024 * 1024  # the SDK's own limit: big tool outputs, images

BUSY_HERE = "session {session_id} already has a prompt of this gateway running"
CANNOT_LOAD = (
    "the agent was restarted and does not offer session/load: session {session_id} cannot "
    "continue; start a new session"
)
NO_ANSWER = "the agent did not answer {method} within {timeout:g} s"
IGNORED_CANCEL = "the agent did not answer session/prompt of session %s within %g s of its cancel"
TURN_CANCELLED = "the turn was cancelled"
NOT_POSITIVE = "AcpUpstream's {name} must be a positive number of {unit}, not {value!r}"


@dataclass(frozen=True, slots=True)
class AcpSession:
    """A session the agent made: its id, and its answer to ``session/new`` as sent."""

    id: str
    data: JSONObject = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PromptResult:
    """How a prompt ended.

    :param stop_reason: the run's: the agent's, or ``cancelled`` for a turn the gateway
        cancelled that the agent answered ``end_turn`` or never answered.
    :param reported: the agent's own ``stopReason``; None when it never answered.
    :param usage: the answer's ``usage`` as sent, when it sent one.
    :param answer: the agent's whole answer as sent; None when it never answered.
    """

    stop_reason: str
    reported: str | None
    usage: JSONObject | None = None
    cancel_requested: bool = False
    answer: JSONObject | None = None


@dataclass(slots=True)
class _Prompt:
    cancel_requested: asyncio.Event = field(default_factory=asyncio.Event)


def _positive(name: str, value: float, unit: str = "seconds") -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise SettingsError(NOT_POSITIVE.format(name=name, unit=unit, value=value))
    return float(value)


class AcpUpstream:
    """An ACP agent behind the gateway; see the module docstring.

    :param command: the agent's program and arguments, run as a child process over stdio.
    :param cwd: the child's working directory, and the default one of its sessions.
    :param env: variables set for the child on top of a minimal environment.
    :param url: instead of a command, the agent's WebSocket endpoint (``ws://``, ``wss://``).
    :param secret_key: sent to that endpoint as ``X-Secret-Key``.
    :param mode: the session mode set on every session made or loaded (goose: ``approve``).
    :param permissions: decides permission requests; by default every one is rejected.
    :param unrouted: called with the updates of sessions nobody listens to.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        cwd: str | None = None,
        env: Mapping[str, str] | None = None,
        url: str | None = None,
        secret_key: str | None = None,
        mode: str | None = None,
        permissions: PermissionHandler = deny,
        unrouted: Listener | None = None,
        cancel_deadline: float = DEFAULT_CANCEL_DEADLINE,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
        restart_delay: float = DEFAULT_RESTART_DELAY,
        max_restart_delay: float = DEFAULT_MAX_RESTART_DELAY,
        stable_after: float = DEFAULT_STABLE_AFTER,
        stop_grace: float = DEFAULT_STOP_GRACE,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.target: AgentTarget = agent_target(
            command=command, cwd=cwd, env=env, url=url, secret_key=secret_key
        )
        self.mode = mode
        self.permissions = permissions
        self.cancel_deadline = _positive("cancel_deadline", cancel_deadline)
        self.start_timeout = _positive("start_timeout", start_timeout)
        self.request_timeout = _positive("request_timeout", request_timeout)
        self.max_message_bytes = int(_positive("max_message_bytes", max_message_bytes, "bytes"))
        self.session_cwd = os.path.abspath(cwd or os.getcwd())
        self.router = UpdateRouter(unrouted)
        self.supervisor = Supervisor(
            self._launch,
            restart_delay=_positive("restart_delay", restart_delay),
            max_restart_delay=_positive("max_restart_delay", max_restart_delay),
            stable_after=_positive("stable_after", stable_after),
            stop_grace=_positive("stop_grace", stop_grace),
        )
        self._cwds: dict[str, str] = {}
        self._prompts: dict[str, _Prompt] = {}
        self._opening: dict[str, asyncio.Lock] = {}

    def __repr__(self) -> str:
        return f"AcpUpstream({self.target.describe()!r})"

    async def _launch(self) -> AgentConnection:
        link: Link
        if isinstance(self.target, StdioAgent):
            link = await StdioLink.open(self.target, self.max_message_bytes)
        else:
            link = await WebSocketLink.open(self.target, self.start_timeout)
        return await AgentConnection.open(
            link, self.router, self.permissions, timeout=self.start_timeout
        )

    async def connection(self) -> AgentConnection:
        """The live connection to the agent, started (or waited for) now if there is none."""
        # Longer than a start may take, so that a start that fails says why itself.
        return await self.supervisor.connection(self.start_timeout + START_MARGIN)

    async def start(self) -> None:
        """Reach the agent now rather than at first use."""
        await self.connection()

    @property
    def pid(self) -> int | None:
        """The agent process's id (None over WebSocket, or while it is down)."""
        current = self.supervisor.current
        return None if current is None or not current.alive else current.pid

    # --- sessions

    async def new_session(self, cwd: str | None = None) -> AcpSession:
        connection = await self.connection()
        cwd = os.path.abspath(cwd or self.session_cwd)
        answer = await self._request(
            connection, "session/new", connection.sdk.new_session(cwd=cwd, mcp_servers=[])
        )
        session_id = answer.session_id
        connection.open_sessions.add(session_id)
        self._cwds[session_id] = cwd
        await self._set_mode(connection, session_id)
        return AcpSession(session_id, answer.model_dump(mode="json", by_alias=True))

    async def open_session(self, session_id: str, cwd: str | None = None) -> bool:
        """Make sure the current agent process has the session open: loaded with
        ``session/load`` (its history replayed, marked `replay`) if it has not. True when it
        was loaded now."""
        return await self._open(await self.connection(), session_id, cwd)

    async def _open(self, connection: AgentConnection, session_id: str, cwd: str | None) -> bool:
        if cwd is not None:
            self._cwds[session_id] = os.path.abspath(cwd)
        async with self._opening.setdefault(session_id, asyncio.Lock()):
            if session_id in connection.open_sessions:
                return False
            if not connection.can_load_session:
                raise AcpSessionLost(CANNOT_LOAD.format(session_id=session_id))
            load = connection.sdk.load_session(
                cwd=self._cwds.get(session_id, self.session_cwd),
                session_id=session_id,
                mcp_servers=[],
            )
            await self._request(connection, "session/load", load)
            connection.open_sessions.add(session_id)
            await self._set_mode(connection, session_id)
            return True

    async def _set_mode(self, connection: AgentConnection, session_id: str) -> None:
        if self.mode is not None:
            setting = connection.sdk.set_session_mode(session_id=session_id, mode_id=self.mode)
            await self._request(connection, "session/set_mode", setting)

    async def _request(self, connection: AgentConnection, method: str, request: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(connection.call(method, request), self.request_timeout)
        except TimeoutError:
            raise UpstreamTimeout(
                NO_ANSWER.format(method=method, timeout=self.request_timeout)
            ) from None

    def listen(
        self, session_id: str, listener: Listener, *, until_answered: bool = False
    ) -> Callable[[], None]:
        """Call `listener` with each update of the session, in wire order (see `UpdateRouter`);
        returns the function that stops it."""
        return self.router.listen(session_id, listener, until_answered=until_answered)

    # --- turns

    async def prompt(
        self,
        session_id: str,
        prompt: str | Sequence[Any],
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> PromptResult:
        """Send ``session/prompt`` (a text, or ACP content blocks) and wait for its answer.

        Raises `AcpSessionBusy` while the session has a prompt running, the agent's error as an
        `AcpRequestError`, and `AcpConnectionLost` when the agent died or went away meanwhile.
        """
        if session_id in self._prompts:
            raise AcpSessionBusy(
                "session/prompt", INVALID_PARAMS, BUSY_HERE.format(session_id=session_id)
            )
        turn = self._prompts[session_id] = _Prompt()
        try:
            connection = await self.connection()
            await self._open(connection, session_id, None)
            if turn.cancel_requested.is_set():
                return PromptResult(CANCELLED, None, cancel_requested=True)
            blocks = [acp.text_block(prompt)] if isinstance(prompt, str) else list(prompt)
            asking = connection.sdk.prompt(session_id=session_id, prompt=blocks, **(meta or {}))
            return await self._until_answered(
                session_id, turn, connection.call("session/prompt", asking)
            )
        finally:
            del self._prompts[session_id]

    async def _until_answered(
        self, session_id: str, turn: _Prompt, call: Awaitable[Any]
    ) -> PromptResult:
        asking = asyncio.ensure_future(call)
        cancelled = asyncio.ensure_future(turn.cancel_requested.wait())
        try:
            await asyncio.wait({asking, cancelled}, return_when=asyncio.FIRST_COMPLETED)
            if not asking.done():
                try:
                    await asyncio.wait_for(asyncio.shield(asking), self.cancel_deadline)
                except TimeoutError:
                    logger.warning(IGNORED_CANCEL, session_id, self.cancel_deadline)
                    return PromptResult(CANCELLED, None, cancel_requested=True)
        finally:
            cancelled.cancel()
            if not asking.done():
                asking.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await asking
        answer = asking.result()
        sent = answer.model_dump(mode="json", by_alias=True, exclude_none=True)
        reported = sent.get("stopReason")
        requested = turn.cancel_requested.is_set()
        return PromptResult(
            stop_reason(reported, cancel_requested=requested),
            reported,
            usage=sent.get("usage"),
            cancel_requested=requested,
            answer=sent,
        )

    async def cancel(self, session_id: str) -> bool:
        """Cancel the session's turn: ``session/cancel``, then its pending permission requests
        answered ``cancelled``. True when a prompt of this gateway was running."""
        turn = self._prompts.get(session_id)
        if turn is not None:
            turn.cancel_requested.set()
        connection = self.supervisor.current
        if connection is not None and connection.alive:
            await connection.notify("session/cancel", connection.sdk.cancel(session_id=session_id))
            connection.client.withdraw(session_id, TURN_CANCELLED)
        return turn is not None

    def prompting(self, session_id: str) -> bool:
        """Whether a prompt of this gateway runs in the session."""
        return session_id in self._prompts

    def pending_permissions(self, session_id: str | None = None) -> list[PermissionRequest]:
        connection = self.supervisor.current
        return [] if connection is None else connection.client.pending(session_id)

    async def aclose(self) -> None:
        """Stop the agent (or close the socket): prompts still waiting fail, permission requests
        are answered ``cancelled``, and nothing is restarted."""
        await self.supervisor.aclose()
