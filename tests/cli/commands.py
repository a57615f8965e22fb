"""``gateway-kit`` commands run as a user runs them, in a subprocess: starting one, reading its
banner, waiting until it serves, stopping it with Ctrl-C, and reading what it streams."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx

from tests.support.waiting import wait_until

EXE = [sys.executable, "-m", "gateway_kit.cli"]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0
# Longer than any silence on a run stream: a run goose lost is ended after a grace period.
STREAM_TIMEOUT = 60.0
BANNER_END = "Ctrl-C stops the demo"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    """Ctrl-C, then what the process wrote."""
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=STOP_TIMEOUT)


@contextlib.contextmanager
def running(command: list[str], cwd: Path) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def read_banner(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(line)
        if line.startswith(BANNER_END):
            return "".join(lines)
    raise AssertionError(f"the demo ended before printing its URLs:\n{''.join(lines)}")


def wait_until_serving(process: subprocess.Popen[str], url: str) -> None:
    def serving() -> bool:
        assert process.poll() is None, f"the server exited: {process.communicate()}"
        with contextlib.suppress(httpx.TransportError):
            httpx.get(url, headers={"accept": "application/json"})
            return True
        return False

    wait_until(serving, START_TIMEOUT, failure=lambda: "the server did not start")


def legacy_task(client: httpx.Client, base: str, message: str) -> str:
    assert client.post(f"{base}/login", json={"username": "demo", "password": "demo"}).is_success
    started = client.post(f"{base}/api/tasks", json={"conversation_id": "c1", "message": message})
    assert started.status_code == 200, started.text
    task_id: str = started.json()["task_id"]
    return task_id


def sse_events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The envelopes of a gateway SSE stream, as they arrive."""
    for line in lines:
        if line.startswith("data:"):
            yield json.loads(line.removeprefix("data:"))
