"""One live connection to the agent: a link, the wire tap, the SDK's client connection,
initialized once.

Every request goes through `call`, which maps what can go wrong to the upstream errors: the
agent's JSON-RPC error (`request_error`), a connection that ended (the link's reason: exit
code, signal, stderr tail, or the protocol violation), an answer of the wrong shape.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, TypeVar

import acp
from acp.schema import Implementation, InitializeResponse
from pydantic import ValidationError

from .client import CAPABILITIES, GatewayClient
from .errors import AcpConnectionLost, AcpProtocolError, request_error
from .links import Link
from .permissions import PermissionHandler
from .updates import UpdateRouter
from .wire import WireTap

T = TypeVar("T")

CLIENT_NAME = "gateway-kit"
WRONG_ANSWER = "the agent answered {method} with something that is not its answer: {error}"
NO_INITIALIZE = "the agent did not answer initialize within {timeout:g} s"
CLOSED = "the gateway closed its connection to the agent"
BROKE = "{method} failed: the connection to the agent broke ({error})"


def client_info() -> Implementation:
    try:
        own_version = version(CLIENT_NAME)
    except PackageNotFoundError:  # run from a source tree that was not installed
        own_version = "0"
    return Implementation(name=CLIENT_NAME, version=own_version)


class AgentConnection:
    """Made by `open`; `ended` is set when the agent is gone or the connection closed."""

    def __init__(self, link: Link, router: UpdateRouter, handler: PermissionHandler) -> None:
        self.link = link
        self.tap = WireTap(link.transport, router)
        self.client = GatewayClient(handler, router)
        self.sdk = acp.connect_to_agent(self.client, self.tap)
        self.opened_at = time.monotonic()
        self.open_sessions: set[str] = set()
        self.ended = asyncio.Event()
        self.initialized: InitializeResponse | None = None
        self._closing: str | None = None
        self._loss: AcpConnectionLost | None = None
        self._watch = asyncio.create_task(self._watch_end(), name="acp-connection-watch")

    @classmethod
    async def open(
        cls, link: Link, router: UpdateRouter, handler: PermissionHandler, *, timeout: float
    ) -> AgentConnection:
        connection = cls(link, router, handler)
        try:
            connection.initialized = await connection.call(
                "initialize",
                asyncio.wait_for(
                    connection.sdk.initialize(
                        protocol_version=acp.PROTOCOL_VERSION,
                        client_capabilities=CAPABILITIES,
                        client_info=client_info(),
                    ),
                    timeout,
                ),
            )
        except TimeoutError:
            await connection.aclose(NO_INITIALIZE.format(timeout=timeout), grace=1.0)
            raise AcpConnectionLost(NO_INITIALIZE.format(timeout=timeout)) from None
        except BaseException:
            await connection.aclose(CLOSED, grace=1.0)
            raise
        return connection

    @property
    def pid(self) -> int | None:
        return self.link.pid

    @property
    def can_load_session(self) -> bool:
        init = self.initialized
        return bool(init and init.agent_capabilities and init.agent_capabilities.load_session)

    @property
    def alive(self) -> bool:
        return not self.ended.is_set()

    async def _watch_end(self) -> None:
        tap_ended = asyncio.create_task(self.tap.ended.wait())
        gone = asyncio.create_task(self.link.gone())
        try:
            await asyncio.wait({tap_ended, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            tap_ended.cancel()
            gone.cancel()
        self._loss = await self._reason()
        self.ended.set()
        self.client.withdraw(None, str(self._loss))
        # A process that exited while something else holds its stdout open: nothing will
        # answer the requests still waiting, so they fail now.
        await self.sdk.close()

    async def _reason(self) -> AcpConnectionLost:
        if self._closing is not None:
            return AcpConnectionLost(self._closing)
        return await self.link.loss(self.tap.violation)

    async def loss(self) -> AcpConnectionLost:
        """Why the connection ended (waiting for it to be known)."""
        await self.ended.wait()
        assert self._loss is not None
        return self._loss

    async def call(self, method: str, request: Awaitable[T]) -> T:
        """`request`'s answer; the agent's error, or the connection's end, as upstream errors."""
        try:
            return await request
        except acp.RequestError as exc:
            raise request_error(method, exc.code, str(exc), exc.data) from exc
        except ConnectionError as exc:
            if not self.ended.is_set() and not self.tap.ended.is_set():
                raise AcpConnectionLost(BROKE.format(method=method, error=exc)) from exc
            loss = await self.loss()
            raise type(loss)(str(loss)) from exc  # one of its own for each waiting request
        except ValidationError as exc:
            raise AcpProtocolError(WRONG_ANSWER.format(method=method, error=exc)) from exc

    async def notify(self, method: str, notification: Awaitable[None]) -> None:
        """Send a notification; on a connection that ended, nothing is sent (and said)."""
        with contextlib.suppress(AcpConnectionLost):
            await self.call(method, notification)

    async def aclose(self, reason: str = CLOSED, *, grace: float) -> None:
        """End the connection: pending permission requests are answered ``cancelled``, waiting
        requests fail with `reason`, the agent is stopped."""
        if self._closing is None and not self.ended.is_set():
            self._closing = reason
        self.client.withdraw(None, reason)
        with contextlib.suppress(Exception):
            await self.link.aclose(grace)
        await self.tap.close()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.ended.wait(), grace + 1.0)
        if not self._watch.done():
            self._watch.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watch
        with contextlib.suppress(Exception):
            await self.sdk.close()

    def describe(self) -> dict[str, Any]:
        init = self.initialized
        info = init.agent_info if init else None
        return {
            "pid": self.pid,
            "load_session": self.can_load_session,
            "agent": None if info is None else info.model_dump(mode="json", exclude_none=True),
        }
