"""A real uvicorn server in a thread of the test process, on a free loopback port."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Any

import uvicorn

from tests.support.waiting import wait_until

START_TIMEOUT = 20.0


@contextlib.contextmanager
def serve_in_thread(app: Any, *, send_buffer: int | None = None, **config: Any) -> Iterator[str]:
    """Serve `app` until the block ends; yields its base URL. `send_buffer` fixes the kernel's
    send buffer of every connection (they inherit it from the listening socket), so that what
    a client does not read stays in the server rather than in the machine's buffers."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    if send_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.bind(("127.0.0.1", 0))
    options: dict[str, Any] = {"log_level": "warning", "lifespan": "on", **config}
    server = uvicorn.Server(uvicorn.Config(app, **options))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started or not thread.is_alive(), START_TIMEOUT)
        assert server.started, "uvicorn did not start"
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(START_TIMEOUT)
        sock.close()
