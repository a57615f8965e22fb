"""Run `server_app` under uvicorn on a loopback socket bound here, and report its port.

``python -m tests.streams.uvicorn_process PORT_FILE [--sndbuf N] [--http H] [--loop L]``: binds
127.0.0.1 on a free port, writes the port to PORT_FILE, then serves until SIGTERM or SIGINT.
``--sndbuf``, when given, is the kernel send buffer of every accepted connection (Linux copies it
from the listening socket); the frozen-client tests keep it small, so a modest amount of data
fills what the kernel holds for a client that stops reading, and the gateway's own queue is
what fills next. ``--http`` and ``--loop`` are uvicorn's settings of those names (default
``auto``: httptools and uvloop, both installed). The gateway's stream messages (a client cut
off, its connection reset) go to uvicorn's log, at INFO, so tests can tell why a stream ended.
"""

from __future__ import annotations

import argparse
import copy
import socket
from pathlib import Path

import uvicorn
from uvicorn.config import LOGGING_CONFIG

LOG_CONFIG = copy.deepcopy(LOGGING_CONFIG)
LOG_CONFIG["loggers"]["gateway_kit.streams"] = {
    "handlers": ["default"],
    "level": "INFO",
    "propagate": False,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port_file")
    parser.add_argument("--sndbuf", type=int, default=None)
    parser.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"])
    parser.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    args = parser.parse_args()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if args.sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, args.sndbuf)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        "tests.streams.server_app:create",
        factory=True,
        access_log=False,
        log_level="info",
        log_config=LOG_CONFIG,
        http=args.http,
        loop=args.loop,
    )
    server = uvicorn.Server(config)
    Path(args.port_file).write_text(str(sock.getsockname()[1]))
    server.run(sockets=[sock])


if __name__ == "__main__":
    main()
