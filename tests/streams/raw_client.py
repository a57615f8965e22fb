"""A minimal HTTP/1.1 SSE client on raw asyncio streams, cheap enough to open by the hundred."""

from __future__ import annotations

import asyncio
import re
import socket
from dataclasses import dataclass, field

ID_LINE = re.compile(rb"^id: (\d+)$", re.MULTILINE)


@dataclass
class RawStream:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    status: int
    ids: list[int] = field(default_factory=list)
    ended: bool = False  # the server completed the response (last chunk)
    closed: bool = False  # the connection closed before the response completed

    async def read_until(self, last_id: int) -> None:
        """Read chunks until the frame with `last_id` arrived, or the response ended."""
        while not self.ids or self.ids[-1] < last_id:
            if not await self.read_chunk():
                return

    async def read_chunk(self) -> bool:
        """Read one body chunk; False once the response is over."""
        try:
            size_line = await self.reader.readline()
            if not size_line:
                self.closed = True
                return False
            size = int(size_line.strip(), 16)
            data = await self.reader.readexactly(size + 2)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed = True
            return False
        if size == 0:
            self.ended = True
            return False
        self.ids.extend(int(m) for m in ID_LINE.findall(data))
        return True

    async def read_to_end(self) -> None:
        while await self.read_chunk():
            pass

    def close(self) -> None:
        self.writer.close()


def request_bytes(host: str, port: int, path: str, headers: dict[str, str] | None = None) -> bytes:
    lines = [f"GET {path} HTTP/1.1", f"Host: {host}:{port}", "Accept: text/event-stream"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def open_stream(
    host: str, port: int, path: str, headers: dict[str, str] | None = None
) -> RawStream:
    reader, writer = await asyncio.open_connection(host, port, limit=2**22)
    writer.write(request_bytes(host, port, path, headers))
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    assert b"transfer-encoding: chunked" in head.lower() or status != 200, head
    return RawStream(reader, writer, status)


def open_frozen(host: str, port: int, path: str, timeout: float = 15.0) -> socket.socket:
    """A client that sends its request and never reads: its receive buffer kept small.

    Returns once the response head has arrived (the server has subscribed the client by then),
    having only peeked at it: nothing is taken from the receive buffer.
    """
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(timeout)
    sock.connect((host, port))
    sock.sendall(request_bytes(host, port, path))
    # Each peek waits (up to the socket's timeout) for a byte more than the last one saw.
    while b"\r\n\r\n" not in (seen := sock.recv(4096, socket.MSG_PEEK)):
        assert seen, "the server closed the connection before its response head"
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, len(seen) + 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, 1)
    return sock


def read_to_close(sock: socket.socket, timeout: float) -> tuple[bytes, bool]:
    """Read everything until the connection ends; the bytes, and whether it ended in a reset.

    After a reset the client still reads what had reached it before (Linux keeps it).
    """
    sock.settimeout(timeout)
    data = bytearray()
    with sock:
        try:
            while chunk := sock.recv(1 << 20):
                data += chunk
        except ConnectionResetError:
            return bytes(data), True
    return bytes(data), False


def read_to_response_end(sock: socket.socket, timeout: float) -> bytes:
    """Read until the chunked response has ended (its last, empty chunk); fail if it does not."""
    sock.settimeout(timeout)
    data = bytearray()
    while not data.endswith(b"\r\n0\r\n\r\n"):
        chunk = sock.recv(1 << 20)
        assert chunk, "the connection closed before the end of the response"
        data += chunk
    return bytes(data)


def complete_frame_ids(data: bytes) -> list[int]:
    """The ids of the complete frames in `data`: a reset can cut the last one short."""
    end = data.rfind(b"\n\n")
    return [int(m) for m in ID_LINE.findall(data[: end + 2] if end >= 0 else b"")]
