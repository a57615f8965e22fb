"""A stand-in for an AI agent in a tmux pane: it draws a screen, then reads lines typed into it.

    python fake_agent.py SCREEN_FILE [ECHO_FILE]

The screen's last line lands on the pane's bottom row (the rows above it stay blank, as after a
clear), with the cursor at its end, where an agent's prompt leaves it. Each line typed into the
pane is appended to ECHO_FILE when one is given.
"""

from __future__ import annotations

import shutil
import signal
import sys
from pathlib import Path


def main(screen_file: str, echo_file: str | None = None) -> None:
    lines = Path(screen_file).read_text(encoding="utf-8").rstrip("\n").split("\n")
    rows = shutil.get_terminal_size().lines
    sys.stdout.write("\n" * max(0, rows - len(lines)) + "\n".join(lines))
    sys.stdout.flush()
    for line in sys.stdin:
        if echo_file is not None:
            with open(echo_file, "a", encoding="utf-8") as echo:
                echo.write(line)
    signal.pause()  # stdin closed: keep the screen up until the pane is killed


if __name__ == "__main__":
    main(*sys.argv[1:3])
