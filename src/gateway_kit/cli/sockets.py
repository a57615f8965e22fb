"""Listening sockets for the servers the command line starts.

asyncio turns on TCP_NODELAY only for sockets that say they are TCP; a socket made without
``IPPROTO_TCP`` says 0, and its accepted connections inherit that, so Nagle's algorithm holds
small responses back by ~40 ms. uvicorn binds its multi-worker socket that way, so we bind it.
"""

from __future__ import annotations

import socket

BACKLOG = 2048
CANNOT_LISTEN = "cannot listen on {host}:{port}: {error}"


def listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # As uvicorn does: a restarted server may reuse its port while old connections linger.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock
