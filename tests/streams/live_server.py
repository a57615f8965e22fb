"""A real uvicorn process serving `server_app` on a free loopback port."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .server_app import LOG_URL_VAR, OPTIONS_VAR

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 15.0
# The states of /proc/net/tcp (include/net/tcp_states.h) in which a socket holds no more data.
TCP_CLOSED_STATES = {"06": "TIME_WAIT", "07": "CLOSE"}
TCP_STATES = {
    "01": "ESTABLISHED",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "08": "CLOSE_WAIT",
    "09": "LAST_ACK",
    "0B": "CLOSING",
    **TCP_CLOSED_STATES,
}


@dataclass(frozen=True)
class TcpSocket:
    """One line of /proc/net/tcp: a socket's state and the bytes it has not sent (tx_queue)."""

    state: str
    unsent: int

    @property
    def open(self) -> bool:
        return self.state not in TCP_CLOSED_STATES.values()


@dataclass
class LiveServer:
    process: subprocess.Popen[bytes]
    host: str
    port: int
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def connection_to(self, client_port: int) -> TcpSocket | None:
        """The server's socket for the client at `client_port` (loopback), None if it has none.

        Read from /proc/net/tcp (the server shares this process's network namespace): the
        kernel's view, which also lists a socket the server closed, or left by exiting, that
        the kernel still holds with its unsent data (FIN_WAIT1).
        """
        table = Path("/proc/net/tcp").read_text().splitlines()[1:]
        for line in table:
            # sl local_address rem_address st tx_queue:rx_queue ...; addresses are HEX_IP:HEX_PORT
            _, local, remote, state, queues, *_ = line.split()
            if int(local.rpartition(":")[2], 16) != self.port:
                continue
            if int(remote.rpartition(":")[2], 16) == client_port:
                unsent = int(queues.partition(":")[0], 16)
                return TcpSocket(TCP_STATES.get(state, state), unsent)
        return None

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` and wait for the process to exit; its exit code."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(STOP_TIMEOUT)


def _wait_listening(server: LiveServer, port_file: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise RuntimeError(f"uvicorn exited at start-up:\n{server.output()}")
        text = port_file.read_text() if port_file.exists() else ""
        if text and "startup complete" in server.output():
            server.port = int(text)
            return
        time.sleep(0.05)
    raise RuntimeError(f"uvicorn did not start listening:\n{server.output()}")


@contextlib.contextmanager
def serve(
    log_url: str,
    tmp_path: Path,
    *,
    sndbuf: int | None = None,
    http: str = "auto",
    loop: str = "auto",
    **options: Any,
) -> Iterator[LiveServer]:
    """Run uvicorn in a subprocess with the gateway `options`; kill it afterwards.

    `http` and `loop` are uvicorn's settings ("auto": httptools and uvloop, as installed).
    """
    env = dict(os.environ)
    env[LOG_URL_VAR] = log_url
    env[OPTIONS_VAR] = json.dumps(options)
    run_dir = Path(tempfile.mkdtemp(prefix="uvicorn-", dir=tmp_path))
    port_file = run_dir / "port"
    log_path = run_dir / "output.log"
    command = [sys.executable, "-m", "tests.streams.uvicorn_process", str(port_file)]
    command += ["--http", http, "--loop", loop]
    if sndbuf is not None:
        command += ["--sndbuf", str(sndbuf)]
    with log_path.open("wb") as out:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = LiveServer(process, "127.0.0.1", 0, log_path)
    try:
        _wait_listening(server, port_file)
        yield server
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
