"""The fake agent served over WebSocket, as ``goose serve`` serves ``/acp``: an ASGI app.

Every connection gets an agent of its own over one shared session store, so a session made on
one connection can be loaded on the next, as goose's sessions outlive a connection. A request
without the secret key (``X-Secret-Key``, or ``?token=``) is refused before the upgrade, which
uvicorn answers with HTTP 403.
"""

from __future__ import annotations

import hmac
from typing import Any, cast
from urllib.parse import parse_qs

from acp.http.asgi import AcpAsgiApp
from acp.http.server import AcpServer
from acp.interfaces import Agent

from ...types import Receive, Scope, Send
from .agent import FakeAcpAgent
from .sessions import SessionStore

SECRET_HEADER = b"x-secret-key"
DEFAULT_SECRET_KEY = "fake-acp-secret"


class FakeAcpServer:
    """An ASGI app serving the fake agent over WebSocket (and ACP's HTTP transport)."""

    def __init__(
        self,
        *,
        secret_key: str | None = DEFAULT_SECRET_KEY,
        store: SessionStore | None = None,
        load_session: bool = True,
    ) -> None:
        self.secret_key = secret_key
        self.store = store or SessionStore()
        self.agents: list[FakeAcpAgent] = []
        self._load_session = load_session
        self._app = AcpAsgiApp(AcpServer(self._agent))

    def _agent(self, conn: Any) -> Agent:
        agent = FakeAcpAgent(store=self.store, load_session=self._load_session)
        self.agents.append(agent)
        return cast(Agent, agent)

    def _allowed(self, scope: Scope) -> bool:
        if self.secret_key is None:
            return True
        expected = self.secret_key.encode()
        for name, value in scope.get("headers", []):
            if name.lower() == SECRET_HEADER and hmac.compare_digest(value, expected):
                return True
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        return any(hmac.compare_digest(t.encode(), expected) for t in query.get("token", []))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("websocket", "http") and not self._allowed(scope):
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            else:
                body = b'{"error":"unauthorized"}'
                headers = [(b"content-type", b"application/json")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
            return
        await self._app(dict(scope), receive, send)
