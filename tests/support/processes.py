"""Gateway processes for multi-process tests: a module run with ``python -m``, serving on a
free loopback port that it writes to the file named by its first argument (`serve_app` does
that, in the process)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class GatewayProcess:
    proc: subprocess.Popen[bytes]
    url: str
    output: Path

    def said(self) -> str:
        """What the process printed, for a failure message."""
        return f"the output of {self.url}:\n{self.output.read_text()}"


@contextmanager
def gateway_process(module: str, *args: str, tmp: Path, name: str) -> Iterator[GatewayProcess]:
    """Run `module` with `args` until the block ends (SIGTERM, then SIGKILL if it hangs)."""
    port_file = tmp / f"port-{name}"
    output = tmp / f"gateway-{name}.log"
    with output.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, str(port_file), *args],
            cwd=ROOT, stdout=sink, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def serving() -> bool:
            assert proc.poll() is None, output.read_text()
            port = port_file.read_text() if port_file.exists() else ""
            if not port:
                return False
            try:
                httpx.get(f"http://127.0.0.1:{port}/gateway/runs/none", timeout=1)
            except httpx.TransportError:
                return False
            return True

        wait_until(serving, timeout=START_TIMEOUT)
        yield GatewayProcess(proc, f"http://127.0.0.1:{port_file.read_text()}", output)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def serve_app(app: Any, port_file: str) -> None:
    """In a gateway process: serve `app` with uvicorn on a free loopback port, written to
    `port_file` once it is bound, until the process is stopped."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    Path(port_file).write_text(str(sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    server.run(sockets=[sock])
