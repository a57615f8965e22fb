"""A private tmux server for tests: its own socket name, killed at the end, with fake agents
(`fake_agent.py`) drawing given screens in its panes."""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from gateway_kit.execution.tmux import Tmux
from tests.support.waiting import wait_until

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
NO_TMUX = "tmux is not installed: these tests need it (scripts/test installs Debian's tmux)"


class TmuxServer:
    def __init__(self, workdir: Path) -> None:
        assert shutil.which("tmux"), NO_TMUX
        self.workdir = workdir
        self.socket_name = f"gk-{uuid.uuid4().hex[:12]}"
        self.tmux = Tmux(socket_name=self.socket_name)

    def start_agent(
        self,
        session: str,
        screen: str,
        *,
        width: int = 100,
        height: int = 30,
        echo: Path | None = None,
    ) -> None:
        """A session whose pane runs a fake agent drawing `screen`, once it is drawn."""
        screen_file = self.workdir / f"{session}.screen"
        screen_file.write_text(screen, encoding="utf-8")
        command = [sys.executable, str(FAKE_AGENT), str(screen_file)]
        if echo is not None:
            command.append(str(echo))
        size = ["-x", str(width), "-y", str(height)]
        self.run("new-session", "-d", "-s", session, *size, *command)
        last = [line.rstrip() for line in screen.splitlines() if line.strip()][-1]
        wait_until(lambda: last in self.tmux.capture(session))

    def run(self, *args: str) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket_name, *args], check=True, capture_output=True, timeout=10
        )

    def kill(self) -> None:
        """Ends the server and removes its socket, which tmux leaves behind."""
        socket = subprocess.run(
            ["tmux", "-L", self.socket_name, "display-message", "-p", "#{socket_path}"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        subprocess.run(
            ["tmux", "-L", self.socket_name, "kill-server"], capture_output=True, timeout=10
        )
        if socket:
            Path(socket).unlink(missing_ok=True)
