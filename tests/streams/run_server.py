"""Run `server_app` under uvicorn on a loopback socket bound here, and report its port.

``python -m tests.streams.run_server PORT_FILE [SNDBUF]``: binds 127.0.0.1 on a free port,
writes the port to PORT_FILE, then serves until SIGTERM or SIGINT. SNDBUF, when given, is the
kernel send buffer of every accepted connection (Linux copies it from the listening socket);
the frozen-client test keeps it small, so a modest amount of data fills what the kernel holds
for a client that stops reading, and the gateway's own queue is what fills next.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import uvicorn


def main(port_file: str, sndbuf: str | None = None) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, int(sndbuf))
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        "tests.streams.server_app:create", factory=True, access_log=False, log_level="info"
    )
    server = uvicorn.Server(config)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main(*sys.argv[1:])
