"""Captures the fixtures again: each screen of `sources.SCREENS`, drawn by the fake agent in a
real tmux pane, saved as ``tmux capture-pane -p`` returns it.

    python -m tests.support.screens.regenerate     (from the repository's root)
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tests.support.screens.sources import HEIGHT, SCREENS, WIDTH
from tests.support.tmux_server import TmuxServer

HERE = Path(__file__).parent


def main() -> None:
    with tempfile.TemporaryDirectory() as workdir:
        server = TmuxServer(Path(workdir))
        try:
            for number, (key, screen) in enumerate(sorted(SCREENS.items())):
                session = f"screen-{number}"
                server.start_agent(session, screen, width=WIDTH, height=HEIGHT)
                fixture = HERE / f"{key}.txt"
                fixture.parent.mkdir(exist_ok=True)
                fixture.write_text(server.tmux.capture(session), encoding="utf-8")
                print(fixture.relative_to(HERE))
        finally:
            server.kill()


if __name__ == "__main__":
    main()
