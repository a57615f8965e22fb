"""How the gateway reaches the agent: a child process over stdio, or a WebSocket.

A link carries JSON-RPC messages (`transport`), says when it is gone without being read
(`gone`: the process exited), and says why it ended (`loss`), as the error a request that was
waiting on it raises.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Protocol

from ...exceptions import UpstreamAuthError
from .errors import AcpConnectionLost, AcpProtocolError
from .process import AgentProcess
from .stdio import StdioTransport
from .target import StdioAgent, WebSocketAgent

# Once stdout ended, a process has this long to exit before its loss is told without its code.
EXIT_WAIT = 2.0
UNREACHABLE = "cannot reach the agent at {url}: {error}"
REFUSED = "the agent at {url} refused the connection with HTTP {status} (check its secret key)"
SOCKET_CLOSED = "the WebSocket connection to the agent at {url} closed"
AUTH_STATUSES = (401, 403)


class Link(Protocol):
    transport: Any

    @property
    def pid(self) -> int | None: ...

    async def gone(self) -> None:
        """Return when the far end is gone (a process that exited); never for a socket."""

    async def loss(self, violation: str | None) -> AcpConnectionLost:
        """Why the link ended: `violation` when the agent broke the protocol."""

    async def aclose(self, grace: float) -> None: ...


class StdioLink:
    def __init__(self, process: AgentProcess, max_message_bytes: int) -> None:
        self.process = process
        proc = process.proc
        assert proc.stdout is not None and proc.stdin is not None
        self.transport = StdioTransport(
            proc.stdout, proc.stdin, max_message_bytes=max_message_bytes
        )

    @classmethod
    async def open(cls, target: StdioAgent, max_message_bytes: int) -> StdioLink:
        return cls(await AgentProcess.spawn(target), max_message_bytes)

    @property
    def pid(self) -> int | None:
        return self.process.pid

    async def gone(self) -> None:
        await asyncio.shield(self.process.exited)

    async def loss(self, violation: str | None) -> AcpConnectionLost:
        violation = violation or self.transport.violation
        if violation is not None:
            return AcpProtocolError(f"{violation} (agent process {self.process.pid})")
        await self.process.settle(EXIT_WAIT)
        return AcpConnectionLost(self.process.exit_text())

    async def aclose(self, grace: float) -> None:
        await self.transport.close()
        await self.process.stop(grace)


class WebSocketLink:
    def __init__(self, target: WebSocketAgent, transport: Any) -> None:
        self.target = target
        self.transport = transport
        self._never = asyncio.Event()

    @classmethod
    async def open(cls, target: WebSocketAgent, timeout: float) -> WebSocketLink:
        from acp.ws import create_websocket_stream
        from websockets.exceptions import InvalidStatus

        try:
            transport = await asyncio.wait_for(
                create_websocket_stream(target.url, headers=target.headers), timeout
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            text = REFUSED.format(url=target.url, status=status)
            if status in AUTH_STATUSES:
                raise UpstreamAuthError(status, text) from exc
            raise AcpConnectionLost(text) from exc
        except Exception as exc:  # refused, reset, timed out, a handshake that failed
            raise AcpConnectionLost(UNREACHABLE.format(url=target.url, error=exc)) from exc
        return cls(target, transport)

    @property
    def pid(self) -> int | None:
        return None

    async def gone(self) -> None:
        await self._never.wait()

    async def loss(self, violation: str | None) -> AcpConnectionLost:
        if violation is not None:
            return AcpProtocolError(f"{violation} (at {self.target.url})")
        return AcpConnectionLost(SOCKET_CLOSED.format(url=self.target.url))

    async def aclose(self, grace: float) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.transport.close(), grace)
