"""The legacy app's Socket.IO channel, as it was: ``GET /api/socket-token`` and a
python-socketio server at ``/socket.io`` that admits a connect carrying that token.

Kept as the legacy server had it, bug included: issuing a token first clears every pending
token of the same user, so of two tabs (or a tab and a CLI) asking at about the same time, the
first to ask cannot connect; and behind a2wsgi, each long poll at ``/socket.io`` holds one of
the app's threads for as long as it waits. Behind `Gateway` (as `gateway_kit.demo.gateway`
builds it), ``GET /api/socket-token`` is answered by the gateway instead, in the same shape,
with a ticket of its own Socket.IO server, which serves ``/socket.io`` too (its
``legacy_socketio_path``), in the event loop: no client knocks another out, and no long poll
reaches Flask.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Any

import socketio

LEGACY_TOKEN_TTL = 45.0
LEGACY_SOCKETIO_PATH = "socket.io"
BAD_TOKEN = "invalid or expired socket token"


class LegacySocketTokens:
    """One-time socket tokens in process memory, per user."""

    def __init__(self, ttl: float = LEGACY_TOKEN_TTL) -> None:
        self.ttl = ttl
        self._pending: dict[str, tuple[str, float]] = {}  # token → (user, expiry)
        self._lock = threading.Lock()

    def issue(self, user: str) -> str:
        token = secrets.token_urlsafe(24)
        now = time.time()
        with self._lock:
            # The legacy behaviour: one pending token per user, the newest.
            for old in [t for t, (u, _) in self._pending.items() if u == user]:
                del self._pending[old]
            self._pending = {t: v for t, v in self._pending.items() if v[1] > now}
            self._pending[token] = (user, now + self.ttl)
        return token

    def consume(self, token: object) -> str | None:
        if not isinstance(token, str):
            return None
        with self._lock:
            found = self._pending.pop(token, None)
        if found is None or found[1] <= time.time():
            return None
        return found[0]


def legacy_socketio(tokens: LegacySocketTokens) -> socketio.Server:
    """The legacy Socket.IO server: a connect is admitted with ``auth={"token": ...}``."""
    server = socketio.Server(async_mode="threading", logger=False, engineio_logger=False)

    def connect(sid: str, environ: dict[str, Any], auth: Any = None) -> None:
        user = tokens.consume(auth.get("token") if isinstance(auth, dict) else None)
        if user is None:
            raise socketio.exceptions.ConnectionRefusedError(BAD_TOKEN)
        server.save_session(sid, {"user": user})

    server.on("connect", connect)
    return server
