"""The tmux_pane heartbeat fallback with a fake tmux and a fake sleep: what it answers for each
screen, how it waits out an idle prompt, how it fails, and the settings it refuses."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from gateway_kit_plugins.tmux_pane import TmuxPaneFallback

from gateway_kit import EventLog, Gateway, PluginError
from gateway_kit.execution.tmux import Tmux, TmuxError
from gateway_kit.hooks import PluginContext

SCREENS = Path(__file__).parents[1] / "support" / "screens"
BUSY = (SCREENS / "claude_code" / "busy-elapsed.txt").read_text(encoding="utf-8")
PERMISSION = (SCREENS / "goose" / "permission-tool-call.txt").read_text(encoding="utf-8")
IDLE = (SCREENS / "codex" / "idle-composer.txt").read_text(encoding="utf-8")
UNKNOWN = (SCREENS / "none" / "unknown-shell.txt").read_text(encoding="utf-8")


class FakeTmux(Tmux):
    """Answers each capture with the next screen given; a TmuxError given is raised."""

    def __init__(self, *screens: str | TmuxError) -> None:
        super().__init__()
        self.screens = list(screens)
        self.captured: list[str] = []

    def capture(self, target: str) -> str:
        self.captured.append(target)
        answer = self.screens.pop(0)
        if isinstance(answer, TmuxError):
            raise answer
        return answer


class FakeSleep:
    def __init__(self) -> None:
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)


def fallback(*screens: str | TmuxError, **settings: Any) -> tuple[TmuxPaneFallback, FakeSleep]:
    sleep = FakeSleep()
    plugin = TmuxPaneFallback(tmux=FakeTmux(*screens), sleep=sleep)
    plugin.configure_plugin(settings, PluginContext())
    return plugin, sleep


@pytest.mark.parametrize(("screen", "kind"), [(BUSY, "busy"), (PERMISSION, "permission")])
def test_a_busy_agent_or_one_asking_for_permission_is_skipped_at_once(
    screen: str, kind: str
) -> None:
    plugin, sleep = fallback(screen)
    assert plugin.heartbeat_fallback("agent-1") == "skip"
    assert sleep.slept == []


def test_an_idle_prompt_unchanged_after_the_hold_is_allowed() -> None:
    plugin, sleep = fallback(IDLE, IDLE, hold=1.5)
    assert plugin.heartbeat_fallback("agent-1") == "allow"
    assert sleep.slept == [1.5]
    assert plugin.tmux.captured == ["agent-1", "agent-1"]  # type: ignore[attr-defined]


def test_an_idle_prompt_that_changed_during_the_hold_is_skipped() -> None:
    plugin, _ = fallback(IDLE, IDLE.replace("five commits", "six commits"))
    assert plugin.heartbeat_fallback("agent-1") == "skip"


def test_an_idle_prompt_that_turned_busy_during_the_hold_is_skipped() -> None:
    plugin, _ = fallback(IDLE, BUSY)
    assert plugin.heartbeat_fallback("agent-1") == "skip"


def test_a_screen_it_cannot_read_is_not_idle() -> None:
    plugin, sleep = fallback(UNKNOWN)
    assert plugin.heartbeat_fallback("agent-1") == "skip"
    assert sleep.slept == []


def test_only_the_agents_configured_are_read_as_idle() -> None:
    plugin, _ = fallback(IDLE, agents=["goose", "aider"])
    assert plugin.heartbeat_fallback("agent-1") == "skip"


def test_switched_off_it_does_not_look() -> None:
    plugin, _ = fallback(enabled=False)
    assert plugin.heartbeat_fallback("agent-1") is None
    assert plugin.tmux.captured == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("second", [False, True], ids=["first capture", "after the hold"])
def test_tmux_failing_is_a_skip_logged_with_the_plugins_name(
    caplog: pytest.LogCaptureFixture, second: bool
) -> None:
    failure = TmuxError("no tmux session named 'agent-9'")
    plugin, _ = fallback(*([IDLE, failure] if second else [failure]))
    with caplog.at_level(logging.WARNING, logger="gateway_kit.plugins.tmux_pane"):
        assert plugin.heartbeat_fallback("agent-9") == "skip"
    [record] = caplog.records
    assert record.name == "gateway_kit.plugins.tmux_pane"
    assert "tmux_pane" in record.getMessage()
    assert "no tmux session named 'agent-9'" in record.getMessage()


def test_each_reading_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    plugin, _ = fallback(BUSY)
    with caplog.at_level(logging.DEBUG, logger="gateway_kit.plugins.tmux_pane"):
        plugin.heartbeat_fallback("agent-1")
    [message] = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert "busy" in message and "claude_code" in message and "claude_code.busy.elapsed" in message


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"hold": -1}, "hold must not be negative"),
        ({"hold": "3s"}, "hold must be a number of seconds"),
        ({"hold": float("nan")}, "hold must be a number of seconds"),
        ({"socket_name": ""}, "socket_name must be a non-empty string"),
        ({"socket_path": 7}, "socket_path must be a non-empty string"),
        ({"socket_name": "a", "socket_path": "/tmp/b"}, "not both"),
        ({"agents": []}, "agents must be a non-empty list"),
        ({"agents": "goose"}, "agents must be a non-empty list"),
        ({"agents": ["goose", "cursor"]}, "agents must be a non-empty list"),
        ({"enabled": "yes"}, "enabled must be true or false"),
        ({"hodl": 3}, "unknown setting"),
    ],
)
def test_settings_that_cannot_work_stop_the_gateway_naming_the_plugin(
    log: EventLog, settings: dict[str, Any], said: str
) -> None:
    with pytest.raises(PluginError, match="tmux_pane") as raised:
        Gateway(
            log=log,
            plugin_config={"tmux_pane": settings},
            allow_anonymous=True,
            load_entry_points=False,
        )
    assert said in str(raised.value)
