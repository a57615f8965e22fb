"""The curl commands `gateway-kit demo` prints work when pasted into a shell as they are."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from .commands import EXE, free_port, read_banner, running, stop

SHELL_TIMEOUT = 60.0


def printed_commands(banner: str) -> list[str]:
    """The shell commands of the banner (its lines indented by four), each with its
    continuation lines."""
    commands: list[str] = []
    continued = False
    for line in banner.splitlines():
        if continued:
            commands[-1] += "\n" + line
        elif line.startswith("    "):
            commands.append(line.strip())
        continued = line.endswith("\\")
    return commands


def shell_env() -> dict[str, str]:
    # The commands call python3: this interpreter's folder has one.
    folder = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def sse_envelopes(text: str) -> list[dict[str, object]]:
    return [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]


def test_the_printed_curl_commands_work_pasted_as_they_are(tmp_path: Path) -> None:
    port = free_port()
    with running([*EXE, "demo", "--port", str(port)], tmp_path) as demo:
        banner = read_banner(demo)
        *finite, follow = printed_commands(banner)
        # Pasted in order into one shell, which stops at the first command that fails.
        script = "set -e -o pipefail\n" + "\n".join(finite)
        pasted = subprocess.run(
            ["bash", "-c", script],
            cwd=tmp_path,
            env=shell_env(),
            capture_output=True,
            text=True,
            timeout=SHELL_TIMEOUT,
        )
        # The endless one: its stream's first events, then Ctrl-C as the banner says.
        following = subprocess.Popen(
            ["bash", "-c", follow],
            cwd=tmp_path,
            env=shell_env(),
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            assert following.stdout is not None
            followed = next(line for line in following.stdout if line.startswith("data:"))
        finally:
            os.killpg(following.pid, signal.SIGINT)
            following.communicate(timeout=SHELL_TIMEOUT)
        stop(demo)

    assert pasted.returncode == 0, pasted.stderr
    # The poll's answer, then the run's stream.
    polled, end = json.JSONDecoder().raw_decode(pasted.stdout)
    run_text = pasted.stdout[end:]
    assert polled["events"][0]["data"]["text"] == "hello"
    run_events = sse_envelopes(run_text)
    assert run_events[0]["type"] == "RunStarted"
    assert run_events[-1]["type"] == "Finish"
    assert json.loads(followed[5:])["stream"] == "demo"
    assert re.search(r"X-CSRF-Token: \$CSRF", banner)
