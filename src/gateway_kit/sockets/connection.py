"""`Connection`: what a process knows of one of its Socket.IO connections, and the refusal of
one of its subscribes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ..principal import Principal


@dataclass
class Connection:
    """What this process knows of one of its Socket.IO connections.

    Its subscribes and unsubscribes are handled concurrently, each awaiting on the way, yet the
    last one the client sent for a stream has the last word: each takes a turn as it arrives,
    and changes `streams` only while its turn is the newest; the room and the presence rows are
    then brought to what `streams` says (presence under `lock`, one write at a time)."""

    sid: str
    connection_id: str
    principal: Principal
    since: float = 0.0  # its credential ending after this (its ticket's issue) closes it
    streams: set[str] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _turns: dict[str, int] = field(default_factory=dict)  # streams with requests in flight
    _taken: int = 0  # turns are never given twice: an old request never passes for a new one

    def take_turn(self, stream: str) -> int:
        self._taken += 1
        self._turns[stream] = self._taken
        return self._taken

    def newest(self, stream: str, turn: int) -> bool:
        return self._turns.get(stream) == turn

    def end_turn(self, stream: str, turn: int) -> None:
        if self.newest(stream, turn):
            del self._turns[stream]


class SubscriptionRefused(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def ack(self) -> dict[str, Any]:
        return {"ok": False, "error": self.code, "message": self.message}
