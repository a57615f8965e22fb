"""A heartbeat fallback that reads the agent's tmux pane: for sessions the observed traffic
knows nothing about, and as the last word before any heartbeat is allowed.

`heartbeat_fallback` captures the session's active pane and reads its bottom lines
(`patterns.py`, version `PATTERNS_VERSION`: goose, Claude Code, Codex, aider):

- busy (thinking, streaming, running a tool) → ``"skip"``;
- asking for permission or an answer → ``"skip"``: what the heartbeat types would answer it;
- idle at an empty prompt → wait ``hold`` seconds and look again: idle again, with the screen
  unchanged, → ``"allow"``; anything else → ``"skip"`` (the agent was just waking up);
- a screen it does not recognize, a session that does not exist, tmux failing → ``"skip"``:
  what cannot be read as idle might be a prompt (logged on ``gateway_kit.plugins.tmux_pane``).

Switched off (``enabled: false``), it answers ``None``: the gateway then decides from the
traffic alone.

Settings (``plugin_config={"tmux_pane": {...}}``): ``enabled`` (default true), ``hold``
(seconds, 3), ``socket_name`` or ``socket_path`` (tmux's ``-L`` / ``-S``: which tmux server),
``agents`` (the pattern sets to read, default all). The hook blocks for ``hold`` seconds: it runs
in a worker thread.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from gateway_kit import hookimpl
from gateway_kit.execution.tmux import Tmux, TmuxError
from gateway_kit.hooks import PluginContext

from .patterns import PATTERNS_VERSION, Reading, read_screen
from .settings import PaneSettings, parse_settings

__all__ = ["PATTERNS_VERSION", "TmuxPaneFallback"]

logger = logging.getLogger("gateway_kit.plugins.tmux_pane")

NAME = "tmux_pane"
UNREADABLE = "%s: session %r: the pane cannot be read, so it is not idle: %s"
READ = "%s: session %r: %s screen of %s (pattern %s)"


class TmuxPaneFallback:
    def __init__(
        self, *, tmux: Tmux | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.given_tmux = tmux
        self.sleep = sleep
        self.settings = PaneSettings()
        self.tmux = tmux or Tmux()

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        self.settings = parse_settings(config)
        self.tmux = self.given_tmux or Tmux(
            socket_name=self.settings.socket_name, socket_path=self.settings.socket_path
        )

    @hookimpl(trylast=True)
    def heartbeat_fallback(self, tmux_session_id: str) -> str | None:
        if not self.settings.enabled:
            return None
        try:
            first = self.tmux.capture(tmux_session_id)
            if self._read(tmux_session_id, first).kind != "idle":
                return "skip"  # busy, asking, or a screen it cannot read
            self.sleep(self.settings.hold)
            again = self.tmux.capture(tmux_session_id)
        except TmuxError as exc:
            logger.warning(UNREADABLE, NAME, tmux_session_id, exc)
            return "skip"
        still_idle = self._read(tmux_session_id, again).kind == "idle"
        return "allow" if still_idle and again == first else "skip"

    def _read(self, session: str, screen: str) -> Reading:
        reading = read_screen(screen, self.settings.agents)
        logger.debug(READ, NAME, session, reading.kind, reading.agent, reading.pattern)
        return reading
