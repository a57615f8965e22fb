"""The fake ACP agent, built on the SDK's agent side: what it answers and sends.

It follows goose's ACP server where a gateway can tell the difference: session ids of the date
and a counter, the modes ``auto`` (the default: no permission asked), ``approve``,
``smart_approve`` and ``chat``; a second prompt while one runs refused with ``-32602`` and
goose's "session already has active run" text; an unknown session ``-32002``; permission
options ``allow_always``, ``allow_once``, ``reject_once``, ``reject_always`` in that order,
each id equal to its kind; the tool's name under ``_meta.goose.toolCall.toolName``;
``session/load`` replaying the history (user and agent messages, tool calls) before it answers;
a cancelled turn answered ``cancelled`` (``end_turn`` when scripted to act as goose up to 1.48).

It differs where goose's behaviour is not needed to test a client: no model, no extensions, no
``usage_update`` or ``session_info_update`` unless scripted, no resumed turn after a load, and
a permission answered ``cancelled`` ends the turn at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

import acp
from acp.schema import (
    AgentCapabilities,
    AllowedOutcome,
    Implementation,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PermissionOption,
    PromptResponse,
    SessionMode,
    SessionModeState,
    SessionNotification,
    SetSessionModeResponse,
    ToolCallUpdate,
    Usage,
)
from pydantic import ValidationError

from .script import Step, echo_steps, parse_prompt
from .sessions import MODES, FakeSession, SessionStore

logger = logging.getLogger(__name__)

T = TypeVar("T")

AGENT_NAME = "fake-acp-agent"
BUSY = "session already has active run `{run}`; use _goose/unstable/session/steer"
NOT_FOUND = "Session not found: {session_id}"
BAD_MODE = "Invalid mode: {mode}"
DECLINED = "The user has declined to run this tool."
PERMISSION_KINDS = ("allow_always", "allow_once", "reject_once", "reject_always")
STDIO_ONLY = "the step {step!r} is only scripted over stdio"
RECORDED_KINDS = frozenset(
    {
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
    }
)


class _Cancelled(Exception):
    pass


class _Stop(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


class FakeAcpAgent:
    """An `acp.interfaces.Agent`; `stdio` says whether it owns the process's stdin/stdout
    (then it can crash and write garbage on stdout when scripted to)."""

    def __init__(
        self, *, store: SessionStore | None = None, load_session: bool = True, stdio: bool = False
    ) -> None:
        self.store = store or SessionStore()
        self.offers_load = load_session
        self.stdio = stdio
        self.conn: Any = None

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    # --- session methods

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=self.offers_load),
            agent_info=Implementation(name=AGENT_NAME, version="0"),
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> None:
        return None

    def _modes(self, session: FakeSession) -> SessionModeState:
        modes = [SessionMode(id=mode, name=mode) for mode in MODES]
        return SessionModeState(current_mode_id=session.mode, available_modes=modes)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session = self.store.create(cwd)
        return NewSessionResponse(session_id=session.id, modes=self._modes(session))

    def _session(self, session_id: str) -> FakeSession:
        session = self.store.get(session_id)
        if session is None:
            said = NOT_FOUND.format(session_id=session_id)
            raise acp.RequestError(-32002, "Resource not found", said)
        return session

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if not self.offers_load:
            raise acp.RequestError.method_not_found("session/load")
        session = self._session(session_id)
        for update in session.history:  # before the answer, as goose replays
            await self._send(session_id, update, record=None)
        return LoadSessionResponse(modes=self._modes(session))

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> SetSessionModeResponse:
        session = self._session(session_id)
        if mode_id not in MODES:
            raise acp.RequestError(-32602, "Invalid params", BAD_MODE.format(mode=mode_id))
        session.mode = mode_id
        self.store.save(session)
        return SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self.store.get(session_id)
        if session is not None:
            session.cancelled.set()

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    # --- prompts

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        session = self._session(session_id)
        if session.active is not None:
            raise acp.RequestError(-32602, "Invalid params", BUSY.format(run=session.active))
        session.active = f"run_{uuid.uuid4().hex[:8]}"
        session.cancelled = asyncio.Event()
        text = "".join(getattr(block, "text", "") for block in prompt)
        turn = _Turn(self, session)
        try:
            await turn.record_prompt(text)
            steps = parse_prompt(text)
            return await turn.run(echo_steps(text) if steps is None else steps)
        finally:
            session.active = None
            self.store.save(session)

    async def _send(
        self, session_id: str, update: dict[str, Any], *, record: FakeSession | None
    ) -> None:
        """Send one update as given: through the SDK's model when it is one, else as is."""
        try:
            notification = SessionNotification.model_validate(
                {"sessionId": session_id, "update": update}
            )
        except ValidationError:
            await self.conn._conn.send_notification(
                "session/update", {"sessionId": session_id, "update": update}
            )
        else:
            await self.conn.session_update(session_id=session_id, update=notification.update)
        if record is not None and update.get("sessionUpdate") in RECORDED_KINDS:
            record.history.append(update)


class _Turn:
    """One prompt's steps."""

    def __init__(self, agent: FakeAcpAgent, session: FakeSession) -> None:
        self.agent = agent
        self.session = session
        self.usage: Usage | None = None
        self.end_turn_on_cancel = False

    async def send(self, update: dict[str, Any]) -> None:
        await self.agent._send(self.session.id, update, record=self.session)

    async def record_prompt(self, text: str) -> None:
        content = {"type": "text", "text": text}
        message_id = f"msg_{uuid.uuid4().hex[:12]}"
        self.session.history.append(
            {"sessionUpdate": "user_message_chunk", "content": content, "messageId": message_id}
        )

    async def until(self, waiting: Awaitable[T]) -> T:
        """`waiting`'s result, or `_Cancelled` when the turn is cancelled first."""
        task = asyncio.ensure_future(waiting)
        cancel = asyncio.ensure_future(self.session.cancelled.wait())
        try:
            await asyncio.wait({task, cancel}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel.cancel()
        if not task.done():
            task.cancel()
            raise _Cancelled
        return task.result()

    async def run(self, steps: list[Step]) -> PromptResponse:
        reason = "end_turn"
        try:
            for step in steps:
                if self.session.cancelled.is_set():
                    raise _Cancelled
                await self.step(step)
        except _Cancelled:
            reason = "end_turn" if self.end_turn_on_cancel else "cancelled"
        except _Stop as stop:
            reason = stop.reason
        return PromptResponse.model_validate({"stopReason": reason, "usage": self.usage})

    async def step(self, step: Step) -> None:
        do = step.get("do")
        if do in ("text", "thought"):
            kind = "agent_message_chunk" if do == "text" else "agent_thought_chunk"
            message_id = step.get("message_id") or f"msg_{uuid.uuid4().hex[:12]}"
            for chunk in step["chunks"]:
                content = {"type": "text", "text": chunk}
                update = {"sessionUpdate": kind, "content": content, "messageId": message_id}
                await self.send(update)
        elif do == "big_text":
            content = {"type": "text", "text": "x" * int(step["bytes"])}
            await self.send({"sessionUpdate": "agent_message_chunk", "content": content})
        elif do == "tool":
            await self.tool(step)
        elif do == "update":
            await self.agent._send(self.session.id, step["update"], record=None)
        elif do == "sleep":
            await self.until(asyncio.sleep(float(step["seconds"])))
        elif do == "hang":
            await self.until(asyncio.Event().wait())
        elif do == "ignore_cancel":
            await asyncio.Event().wait()
        elif do == "end_turn_on_cancel":
            self.end_turn_on_cancel = True
        elif do == "usage":
            total = int(step["input"]) + int(step["output"])
            self.usage = Usage(
                input_tokens=step["input"], output_tokens=step["output"], total_tokens=total
            )
        elif do == "error":
            raise acp.RequestError(int(step["code"]), str(step["message"]), step.get("data"))
        elif do == "stop":
            raise _Stop(str(step["reason"]))
        else:
            await self.process_step(step)

    async def process_step(self, step: Step) -> None:
        """What only an agent owning its process does: crash, write to stderr or stdout."""
        do = step.get("do")
        if do == "stderr":
            line = max(1, int(step.get("line", 1000)))
            left = int(step["bytes"])
            while left > 0:
                size = min(line, left)
                sys.stderr.write("e" * (size - 1) + "\n")
                left -= size
            sys.stderr.flush()
            return
        if not self.agent.stdio:
            raise acp.RequestError.invalid_params({"details": STDIO_ONLY.format(step=do)})
        if do == "crash":
            sys.stderr.flush()
            os._exit(int(step.get("code", 3)))
        elif do == "stdout":
            os.write(sys.stdout.fileno(), str(step["text"]).encode())
        else:
            raise acp.RequestError.invalid_params({"details": f"unknown step {step!r}"})

    async def tool(self, step: Step) -> None:
        call_id = step.get("id") or f"call_{uuid.uuid4().hex[:12]}"
        name = str(step["name"])
        title = step.get("title") or name
        arguments = step.get("arguments") or {}
        extension = name.split("__")[0]
        meta = {"goose": {"toolCall": {"toolName": name, "extensionName": extension}}}
        await self.send(
            {
                "sessionUpdate": "tool_call",
                "toolCallId": call_id,
                "title": title,
                "kind": step.get("kind") or "other",
                "status": "pending",
                "rawInput": arguments,
                "_meta": meta,
            }
        )
        if step.get("progress"):
            progress = {"sessionUpdate": "tool_call_update", "toolCallId": call_id}
            await self.send({**progress, "status": "in_progress"})
        if step.get("permission") and self.session.mode != "auto":
            allowed = await self.ask(call_id, title, arguments)
            if not allowed:
                await self.ended(call_id, DECLINED, failed=True)
                return
        await self.ended(call_id, str(step.get("result", "")), failed=bool(step.get("fail")))

    async def ended(self, call_id: str, text: str, *, failed: bool) -> None:
        content = [{"type": "content", "content": {"type": "text", "text": text}}]
        await self.send(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "failed" if failed else "completed",
                "content": content,
            }
        )

    async def ask(self, call_id: str, title: str, arguments: dict[str, Any]) -> bool:
        """Ask permission as goose does; True when an allowing option was chosen."""
        tool_call = ToolCallUpdate(
            tool_call_id=call_id, title=title, kind="other", status="pending", raw_input=arguments
        )
        options = [
            PermissionOption.model_validate({"optionId": kind, "name": kind, "kind": kind})
            for kind in PERMISSION_KINDS
        ]
        asking = asyncio.ensure_future(
            self.agent.conn.request_permission(
                session_id=self.session.id, tool_call=tool_call, options=options
            )
        )
        cancel = asyncio.ensure_future(self.session.cancelled.wait())
        try:
            await asyncio.wait({asking, cancel}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel.cancel()
        # After a cancel the client still owes the answer (`cancelled`): wait for it.
        answer = await asking
        chosen_id = getattr(answer.outcome, "option_id", "")
        said = f"permission {call_id}: {answer.outcome.outcome} {chosen_id}".strip()
        if self.agent.stdio:
            print(said, file=sys.stderr, flush=True)  # for the client's stderr log
        else:
            logger.info(said)
        if self.session.cancelled.is_set():
            raise _Cancelled
        outcome = answer.outcome
        if not isinstance(outcome, AllowedOutcome):
            raise _Cancelled
        chosen = {option.option_id: option.kind for option in options}.get(outcome.option_id)
        return chosen in ("allow_once", "allow_always")
