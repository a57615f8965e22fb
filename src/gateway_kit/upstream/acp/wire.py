"""The tap on one connection's messages: where `session/update`s leave the SDK's path.

The SDK runs every notification in a task of its own, so updates handled there can be handled
out of order. The tap sits between the transport and the SDK's connection and takes each
``session/update`` off the wire as it is read, in order, before anything awaits: it hands the
update to the router and the SDK never sees it (nor parses it, nor logs an update of a kind it
does not know). Requests and answers go on to the SDK.

It also knows which updates replay history: those of a session between the ``session/load``
request sent for it and its answer read. And it tells the router when the agent answers a
session's ``session/prompt``, at that point of the wire, so that a turn's listener takes exactly
the updates sent before the answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from dataclasses import replace
from typing import Any

from acp.connection import JsonValue
from acp.meta import AGENT_METHODS, CLIENT_METHODS

from .updates import UpdateRouter, update_from

logger = logging.getLogger(__name__)

SESSION_UPDATE = CLIENT_METHODS["session_update"]
SESSION_LOAD = AGENT_METHODS["session_load"]
SESSION_PROMPT = AGENT_METHODS["session_prompt"]
TRACKED = (SESSION_LOAD, SESSION_PROMPT)
NOT_A_MESSAGE = "the agent sent something that is not a JSON-RPC message: {value!r}"
MAX_QUOTED_CHARS = 200


class WireTap:
    """A message `Transport` around the link's own."""

    def __init__(self, inner: Any, router: UpdateRouter) -> None:
        self._inner = inner
        self._router = router
        self._asked: dict[JsonValue, tuple[str, str]] = {}  # request id → (method, session)
        self._replaying: Counter[str] = Counter()  # sessions with a session/load unanswered
        self.ended = asyncio.Event()
        self.violation: str | None = None

    def replaying(self, session_id: str) -> bool:
        return self._replaying[session_id] > 0

    async def send(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        tracked = method in TRACKED and "id" in message
        if tracked:
            params = message.get("params") or {}
            session_id = str(params.get("sessionId", ""))
            self._asked[message["id"]] = (str(method), session_id)
            if method == SESSION_LOAD:
                self._replaying[session_id] += 1
            else:
                self._router.prompt_sent(session_id, message["id"])
        try:
            await self._inner.send(message)
        except BaseException:
            if tracked:
                self._answered(message["id"])
            raise

    async def receive(self) -> dict[str, Any] | None:
        while True:
            message = await self._inner.receive()
            if message is None:
                self.ended.set()
                return None
            if not isinstance(message, dict):
                self.violation = NOT_A_MESSAGE.format(value=str(message)[:MAX_QUOTED_CHARS])
                self.ended.set()
                return None
            method = message.get("method")
            if method == SESSION_UPDATE and "id" not in message:
                self._deliver(message.get("params"))
                continue
            if method is None and "id" in message:
                self._answered(message["id"])
            return message

    def _deliver(self, params: object) -> None:
        update = update_from(params)
        if update is None:
            logger.warning("the agent sent a session/update without its session or update")
            return
        if self._replaying[update.session_id] > 0:
            update = replace(update, replay=True)
        self._router.deliver(update)

    def _answered(self, request_id: JsonValue) -> None:
        asked = self._asked.pop(request_id, None)
        if asked is None:
            return
        method, session_id = asked
        if method == SESSION_LOAD:
            self._replaying[session_id] -= 1
            if self._replaying[session_id] <= 0:
                del self._replaying[session_id]
        else:
            self._router.prompt_answered(session_id, request_id)

    async def close(self) -> None:
        self.ended.set()
        await self._inner.close()
