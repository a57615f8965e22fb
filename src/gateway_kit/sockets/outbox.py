"""`Outboxes`: what python-socketio holds unsent for each of this process's connections.

python-socketio queues every message for a connection without bound, and the connection's
writer takes them from that queue only as fast as the client reads. A client that reads slowly
(a phone on a bad network) or not at all would make the gateway hold the log for it in memory,
as much of it as it is sent. So the room feeds look at that queue: a replay waits for the
writer to take one page before it reads the next, and a member whose queue outgrows the limit
leaves the room and catches up from the log once its writer has taken what it holds (the same
limit and timeout as an SSE client's). A connection whose writer cannot send what it holds
(a page and the limit at most) within the timeout is closed, and its client reconnects with its
cursor.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from engineio import packet as engineio_packet

logger = logging.getLogger(__name__)

NAMESPACE = "/"


class Outboxes:
    """:param sio: the Socket.IO server whose connections' queues are looked at.
    :param limit: messages one connection may have waiting before it is fed from the log.
    :param timeout: seconds a connection's writer may take to send what it holds and come
        back for what waits.
    """

    def __init__(self, sio: Any, *, limit: int, timeout: float) -> None:
        self.sio = sio
        self.limit = limit
        self.timeout = timeout

    def pending(self, sid: str) -> int:
        """How many messages wait for the connection `sid`'s writer."""
        socket = self._socket(sid)
        return 0 if socket is None else int(socket.queue.qsize())

    def over(self, sid: str) -> bool:
        return self.pending(sid) > self.limit

    async def drained(self, sid: str, gone: asyncio.Event) -> bool:
        """Wait until `sid`'s writer has taken every message queued for it. False when the
        connection ended or `gone` was set first, or when the writer did not come back for them
        within the timeout (it was still sending what it took before): that connection is
        closed."""
        socket = self._socket(sid)
        if socket is None or gone.is_set():
            return False
        queue: asyncio.Queue[Any] = socket.queue
        if not queue.qsize():
            return True
        taken = asyncio.ensure_future(queue.join())
        left = asyncio.ensure_future(gone.wait())
        try:
            done, _ = await asyncio.wait(
                (taken, left), timeout=self.timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            taken.cancel()
            left.cancel()
        if not done:
            await self._close(sid, socket)
        return taken in done and not gone.is_set()

    async def _close(self, sid: str, socket: Any) -> None:
        queue: asyncio.Queue[Any] = socket.queue
        logger.info(
            "closing socket %s: its client read too little to take its %d waiting messages in %g s",
            sid,
            queue.qsize(),
            self.timeout,
        )
        # Closed at once: the server's disconnect handlers run now, not after the client has
        # read what waits for it.
        with contextlib.suppress(Exception):
            await socket.close(wait=False, abort=True)
        # What waits is let go now, and engine.io's goodbye takes its place: the writer sends
        # it once the client reads again (the client then reconnects with its cursor), and
        # ends, closing the websocket.
        while not queue.empty():
            queue.get_nowait()
            queue.task_done()
        queue.put_nowait(engineio_packet.Packet(engineio_packet.CLOSE))
        queue.put_nowait(None)

    def _socket(self, sid: str) -> Any:
        """python-engineio's socket under the Socket.IO connection `sid`, while it is open."""
        eio_sid = self.sio.manager.eio_sid_from_sid(sid, NAMESPACE)
        socket = self.sio.eio.sockets.get(eio_sid) if eio_sid is not None else None
        return None if socket is None or socket.closed else socket
