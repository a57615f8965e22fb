"""Closing the connection of a client that stopped reading, for real.

What the server does otherwise (uvicorn 0.54, h11 and httptools alike): an application
that returns with its response unfinished gets ``transport.close()``. asyncio's and uvloop's
transports both close their socket only once their write buffer is empty, and the buffer of a
client that does not read never empties: the connection stays open for good, holding what the
server buffered for the client (up to the flow-control high-water mark plus the chunk last
written, a whole replay page) and the kernel's send buffer. Even a transport with an empty
buffer, once closed, only hands its socket to the kernel. The kernel keeps it in FIN_WAIT1 with
the unsent data (up to the send buffer: megabytes once Linux has auto-tuned it) until it gives up
probing the peer's closed window ("orphan retries": 339 s for 2.8 MB on loopback, measured).
``transport.abort()`` drops the transport's buffer but leaves the kernel's.

Deliberate deviations from a standard, with the reason: ASGI has no message that aborts a
connection, so a client the responder cuts off for not reading would keep both buffers. So the
responder reaches the connection's transport through the server's request cycle, the owner of
the bound ``send``, as `shutdown.py` does (``send.__self__.transport``: uvicorn's h11 and
httptools cycles both have it). It uses only the transport's own API (asyncio's, which uvloop
matches):

- ``get_write_buffer_size()``: whether the end of a response has left the server;
- the reset: ``SO_LINGER`` on with a zero timeout on its TCP socket
  (``get_extra_info("socket")``), then ``abort()``. The transport drops its buffer and closes the
  socket; the kernel then drops the unsent data and sends RST. The client reads what it had
  already received, then sees the connection reset, and resumes by cursor.

Nothing of the server is written except that socket option. With a server that does not offer a
transport this way, `client_connection` finds none and the responder does what it did before:
it leaves the response unfinished and the server closes the connection in its own time.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from typing import Any, Protocol

DRAIN_POLL = 0.02  # seconds between looks at the write buffer while waiting for it to empty
# struct linger {int l_onoff; int l_linger;}: on, 0 s: closing the socket resets the connection.
RESET_LINGER = struct.pack("ii", 1, 0)
TCP_FAMILIES = (socket.AF_INET, socket.AF_INET6)
TRANSPORT_METHODS = ("abort", "get_write_buffer_size", "get_extra_info")


class Transport(Protocol):
    """What is used of a server's transport (uvloop's is no `asyncio.Transport` subclass)."""

    def abort(self) -> None: ...

    def get_write_buffer_size(self) -> int: ...

    def get_extra_info(self, name: str, default: Any = None) -> Any: ...


class ClientConnection:
    """One client's connection as the server holds it: what it has not sent yet, and a reset."""

    __slots__ = ("transport",)

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def unsent(self) -> int:
        """Bytes the server holds for the client and has not handed to the kernel yet."""
        return self.transport.get_write_buffer_size()

    async def drained(self) -> None:
        """Return once the server holds nothing unsent for the client; wrap in a timeout."""
        while self.unsent():
            await asyncio.sleep(DRAIN_POLL)

    async def reset(self) -> None:
        """Drop the connection and everything buffered for it, in the server and the kernel."""
        sock = self.transport.get_extra_info("socket")
        if getattr(sock, "family", None) in TCP_FAMILIES:
            with contextlib.suppress(OSError):  # then the kernel drops it later, unreset
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET_LINGER)
        self.transport.abort()
        # One turn of the loop: the transport reports the connection lost (it schedules that
        # with call_soon) before the application returns, so the server takes the unfinished
        # response for a disconnected client, not for an application error.
        await asyncio.sleep(0)


def client_connection(send: Any) -> ClientConnection | None:
    """The connection behind uvicorn's bound `send`, when the server shows it; else None."""
    cycle = getattr(send, "__self__", None)
    transport: Any = getattr(cycle, "transport", None)
    if not all(callable(getattr(transport, name, None)) for name in TRANSPORT_METHODS):
        return None
    return ClientConnection(transport)
