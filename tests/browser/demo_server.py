"""The demo served by `gateway-kit serve` in a subprocess for a headless Chromium (Debian's; a
test fails when it is missing), and the demo's conversation page opened in it."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
from playwright.sync_api import Page

from tests.support.waiting import wait_until

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
NO_CHROMIUM = (
    f"{CHROMIUM} is missing: install Debian's chromium (scripts/test does, as root); "
    "this test never skips"
)
STREAM = "conv-browser"
START_TIMEOUT = 30.0
WAIT_MS = 30_000


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Server:
    """`gateway-kit serve` of the demo's gateway, in a subprocess on a fixed port."""

    def __init__(self, db_url: str, port: int, output: Path) -> None:
        self.db_url, self.port, self.output = db_url, port, output
        self.process: subprocess.Popen[bytes] | None = None
        self.token = ""

    @property
    def auth(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self.token}"}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        command = [sys.executable, "-m", "gateway_kit.cli", "serve"]
        command += ["gateway_kit.demo.gateway:app", "--db", self.db_url, "--port", str(self.port)]
        with self.output.open("ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        process = self.process

        def serving() -> bool:
            assert process.poll() is None, f"the server exited:\n{self.output.read_text()}"
            try:
                return httpx.get(f"{self.url}/login").status_code == 200
            except httpx.TransportError:
                return False

        def failure() -> str:
            return f"the server did not start:\n{self.output.read_text()}"

        wait_until(serving, START_TIMEOUT, failure=failure)

    def kill(self) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        return self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def open_conversation(page: Page, server: Server) -> None:
    """Log in on the demo's login page, which then shows the conversation, live."""
    page.goto(f"{server.url}/login?next=/conversations/{STREAM}")
    page.fill("input[name=username]", "demo")
    page.fill("input[name=password]", "demo")
    page.click("form button")
    page.wait_for_url(f"{server.url}/conversations/{STREAM}")
    page.wait_for_function("document.getElementById('state').className === 'live'")
    page.wait_for_function("document.getElementById('socket-state').className === 'live'")
