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
    log_url: str, tmp_path: Path, *, sndbuf: int | None = None, **options: Any
) -> Iterator[LiveServer]:
    """Run uvicorn in a subprocess with the gateway `options`; kill it afterwards."""
    env = dict(os.environ)
    env[LOG_URL_VAR] = log_url
    env[OPTIONS_VAR] = json.dumps(options)
    run_dir = Path(tempfile.mkdtemp(prefix="uvicorn-", dir=tmp_path))
    port_file = run_dir / "port"
    log_path = run_dir / "output.log"
    command = [sys.executable, "-m", "tests.streams.run_server", str(port_file)]
    if sndbuf is not None:
        command.append(str(sndbuf))
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
