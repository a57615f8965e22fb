"""Against a real tmux server of the test's own: the plugin reads fake agents' panes, `Tmux`
names sessions exactly and types text as it is. tmux missing fails these tests, it does not
skip them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.execution.tmux import TmuxError
from tests.waiting import wait_until

from .tmux_server import TmuxServer


def source(key: str) -> str:
    from .screens.sources import SCREENS as SOURCES

    return SOURCES[key]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[TmuxServer]:
    server = TmuxServer(tmp_path)
    try:
        yield server
    finally:
        server.kill()


def test_the_plugin_reads_the_agents_panes_of_the_tmux_server_it_is_given(
    server: TmuxServer, log: EventLog
) -> None:
    server.start_agent("busy", source("claude_code/busy-elapsed"))
    server.start_agent("asking", source("goose/permission-tool-call"))
    server.start_agent("idle", source("aider/idle-prompt"))
    server.start_agent("shell", source("none/unknown-shell"))
    gateway = Gateway(
        log=log,
        plugin_config={"tmux_pane": {"socket_name": server.socket_name, "hold": 0.2}},
        allow_anonymous=True,
        load_entry_points=False,
    )
    decide = gateway.plugins.hook.heartbeat_fallback
    assert decide(tmux_session_id="busy") == "skip"
    assert decide(tmux_session_id="asking") == "skip"
    assert decide(tmux_session_id="idle") == "allow"
    assert decide(tmux_session_id="shell") is None
    assert decide(tmux_session_id="gone") is None


def test_send_text_types_the_text_as_it_is_then_enter(server: TmuxServer, tmp_path: Path) -> None:
    echo = tmp_path / "typed.txt"
    server.start_agent("agent", source("goose/idle-prompt"), echo=echo)
    server.tmux.send_text("agent", "C-c Enter -l heartbeat: carry on")
    wait_until(lambda: echo.exists() and echo.read_text(encoding="utf-8").endswith("\n"))
    assert echo.read_text(encoding="utf-8") == "C-c Enter -l heartbeat: carry on\n"


def test_text_with_a_newline_or_a_control_character_is_refused_before_anything_is_typed(
    server: TmuxServer, tmp_path: Path
) -> None:
    echo = tmp_path / "typed.txt"
    server.start_agent("agent", source("goose/idle-prompt"), echo=echo)
    for text in ("first\nsecond", "stop\x03", "tab\there", "bell\x07"):
        with pytest.raises(ValueError, match="one line without control characters"):
            server.tmux.send_text("agent", text)
    server.tmux.send_text("agent", "only this")
    wait_until(lambda: echo.exists() and echo.read_text(encoding="utf-8").endswith("\n"))
    assert echo.read_text(encoding="utf-8") == "only this\n"


def test_sessions_are_named_exactly(server: TmuxServer) -> None:
    server.start_agent("abcdef", source("codex/idle-composer"))
    server.start_agent("abc", source("goose/idle-prompt"))
    tmux = server.tmux
    assert tmux.pane_id("abc") != tmux.pane_id("abcdef")
    assert "( O)>" in tmux.capture("abc")
    assert "Ask Codex" in tmux.capture("abcdef")
    assert tmux.capture(tmux.pane_id("abcdef")) == tmux.capture("abcdef")
    assert tmux.has_session("abc") and tmux.has_session("abcdef")
    for name in ("ab", "abcd", "abc:0", "abc.0", "abc:0.0"):
        assert not tmux.has_session(name)
        with pytest.raises(TmuxError, match="no tmux session named"):
            tmux.pane_id(name)


def test_a_missing_pane_or_server_is_a_tmux_error(server: TmuxServer) -> None:
    server.start_agent("agent", source("goose/idle-prompt"))
    with pytest.raises(TmuxError):
        server.tmux.capture("%999")
    server.kill()
    with pytest.raises(TmuxError):
        server.tmux.capture("agent")
    assert not server.tmux.has_session("agent")
