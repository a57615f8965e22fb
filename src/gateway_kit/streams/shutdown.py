"""Closing open streams promptly when the server stops, without patching the server.

What uvicorn does on shutdown (0.29 to 0.54, every HTTP/1 protocol): it stops listening, then
calls ``shutdown()`` on each connection. An idle connection is closed; a connection in the
middle of a response only gets ``cycle.keep_alive = False``, so it closes once the response
ends. ``receive()`` does not answer ``http.disconnect`` and the transport stays open, so an
endless stream would keep the server waiting for ever (``timeout_graceful_shutdown`` is unset by
default), and the ASGI ``lifespan.shutdown`` message only arrives after every connection ended.

So the streams watch, at a short interval, the two things uvicorn changes without telling the
application, and end their response cleanly when either changes (the connection then closes and
the client resumes, elsewhere or after the restart, from its cursor):

- the server's exit flag: uvicorn installs its bound ``Server.handle_exit`` as the SIGTERM and
  SIGINT handler, and that server's ``should_exit`` turns true on the signal;
- the connection's request cycle (the owner of the bound ``send``): ``keep_alive`` turning from
  true to false is the server asking this connection to finish; this also works where no signal
  handler is installed, such as a server run in a thread.

Both are read, never written. Servers offering neither are covered by `Gateway.close_streams()`
and by the lifespan shutdown message, which also stop every stream.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable
from typing import Any

from .fanout import STOP_SHUTDOWN, Hub, Subscription

POLL_INTERVAL = 0.2  # seconds; how soon an open stream notices the server stopping

Probe = Callable[[], bool]


def server_exit_probe() -> Probe | None:
    """A probe of the running server's exit flag, found through its signal handler."""
    for signum in (signal.SIGTERM, signal.SIGINT):
        owner: Any = getattr(signal.getsignal(signum), "__self__", None)
        if isinstance(getattr(owner, "should_exit", None), bool):
            return lambda: bool(owner.should_exit)
    return None


def connection_probe(send: Any) -> Probe | None:
    """A probe of "the server asked this connection to finish", when the server shows it."""
    cycle: Any = getattr(send, "__self__", None)
    if getattr(cycle, "keep_alive", None) is not True:
        return None  # not shown, or the connection was going to close anyway
    return lambda: cycle.keep_alive is False


class ShutdownWatch:
    """Stops the subscriptions of one event loop when the server stops or is told to."""

    def __init__(self, hub: Hub, *, interval: float = POLL_INTERVAL) -> None:
        self.hub = hub
        self.interval = interval
        self.closing = False
        self._probes: dict[Subscription, Probe] = {}
        self._server_probe: Probe | None = None
        self._task: asyncio.Task[None] | None = None

    def watch(self, sub: Subscription, send: Any) -> None:
        """Stop `sub` when its server shuts down; call it from the loop serving `sub`."""
        if self.closing:
            sub.stop(STOP_SHUTDOWN)
            return
        probe = connection_probe(send)
        if probe is not None:
            self._probes[sub] = probe
        if self._server_probe is None:
            self._server_probe = server_exit_probe()
        if self._task is None:
            self._task = asyncio.create_task(self._poll(), name="gateway-kit-shutdown-watch")

    def forget(self, sub: Subscription) -> None:
        self._probes.pop(sub, None)

    def close(self) -> None:
        """Stop every open stream now, and any stream opened later until `reopen()`."""
        self.closing = True
        self.hub.stop_all(STOP_SHUTDOWN)

    def reopen(self) -> None:
        self.closing = False

    async def _poll(self) -> None:
        try:
            while len(self.hub):
                await asyncio.sleep(self.interval)
                if self._server_probe is not None and self._server_probe():
                    self.close()
                    return
                for sub, probe in list(self._probes.items()):
                    if probe():
                        sub.stop(STOP_SHUTDOWN)
        finally:
            self._task = None
