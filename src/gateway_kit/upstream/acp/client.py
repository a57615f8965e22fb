"""The client side of ACP that the gateway implements (`acp.interfaces.Client`, duck-typed).

Only permission requests are served. The gateway advertises neither file-system nor terminal
capabilities at `initialize`, and refuses those methods (`method not found`) should an agent
call them anyway. `session/update`s never reach `session_update` here: the wire tap takes them
off the connection first (`wire.py`).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from acp import RequestError
from acp.schema import (
    AllowedOutcome,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    PermissionOption,
    RequestPermissionResponse,
    ToolCallUpdate,
)

from .permissions import PermissionHandler, PermissionRequest, choose_option
from .updates import UpdateRouter

logger = logging.getLogger(__name__)

CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
)
HANDLER_FAILED = "the permission handler failed on a request of session %s: answered cancelled"


def _wire(model: Any) -> dict[str, Any]:
    dumped: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


class GatewayClient:
    def __init__(self, handler: PermissionHandler, router: UpdateRouter) -> None:
        self._handler = handler
        self._router = router
        self._pending: dict[str, dict[asyncio.Task[str | None], PermissionRequest]] = {}

    def on_connect(self, conn: Any) -> None:
        pass

    # --- permissions

    async def request_permission(
        self,
        session_id: str,
        tool_call: ToolCallUpdate,
        options: list[PermissionOption],
        **meta: Any,
    ) -> RequestPermissionResponse:
        call = _wire(tool_call)
        request = PermissionRequest(
            session_id=session_id,
            tool_call=call,
            options=[_wire(option) for option in options],
            announced=self._router.tool_call(session_id, str(call.get("toolCallId", ""))),
            meta=meta or None,
        )
        decision = asyncio.create_task(self._decide(request), name="acp-permission")
        pending = self._pending.setdefault(session_id, {})
        pending[decision] = request
        try:
            await asyncio.wait({decision})
        except asyncio.CancelledError:
            request.withdrawn = request.withdrawn or "the connection to the agent closed"
            decision.cancel()
            raise
        finally:
            pending.pop(decision, None)
            if not pending:
                self._pending.pop(session_id, None)
        kind: str | None = None
        if request.withdrawn is not None or decision.cancelled():
            kind = None  # what a withdrawn request's handler still answers comes too late
        elif decision.exception() is not None:
            logger.error(HANDLER_FAILED, session_id, exc_info=decision.exception())
        else:
            kind = decision.result()
        return answer(request, kind)

    async def _decide(self, request: PermissionRequest) -> str | None:
        return await self._handler(request)

    def withdraw(self, session_id: str | None, reason: str) -> int:
        """Answer the pending requests of a session (of every session with None) ``cancelled``;
        how many there were."""
        sessions = list(self._pending) if session_id is None else [session_id]
        count = 0
        for sid in sessions:
            for decision, request in list(self._pending.get(sid, {}).items()):
                if not decision.done():
                    request.withdrawn = reason
                    decision.cancel(reason)
                    count += 1
        return count

    def pending(self, session_id: str | None = None) -> list[PermissionRequest]:
        """The requests waiting for a decision (of one session, or all)."""
        sessions = list(self._pending) if session_id is None else [session_id]
        return [request for sid in sessions for request in self._pending.get(sid, {}).values()]

    # --- what the gateway does not offer

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        pass  # taken off the wire before the SDK sees it

    async def read_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/read_text_file")

    async def write_text_file(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("fs/write_text_file")

    async def create_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/create")

    async def terminal_output(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/output")

    async def release_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/release")

    async def wait_for_terminal_exit(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/wait_for_exit")

    async def kill_terminal(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("terminal/kill")

    async def create_elicitation(self, *args: Any, **kwargs: Any) -> Any:
        raise RequestError.method_not_found("elicitation/create")

    async def complete_elicitation(self, *args: Any, **kwargs: Any) -> None:
        pass

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        pass


def answer(request: PermissionRequest, kind: str | None) -> RequestPermissionResponse:
    """The response selecting the option of `kind`, or ``cancelled``."""
    option_id = choose_option(request.options, kind)
    if option_id is None:
        return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
    selected = AllowedOutcome(outcome="selected", option_id=option_id)
    return RequestPermissionResponse(outcome=selected)
