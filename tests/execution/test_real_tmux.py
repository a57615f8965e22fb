"""Against a real tmux server of the test's own: the plugin reads fake agents' panes, `Tmux`
names sessions exactly and types text as it is, and a heartbeat never types into a pane that
shows a prompt, whatever the traffic says. tmux missing fails these tests, it does not skip
them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.bindings.claims import claims_of
from gateway_kit.cli.heartbeat import one_round
from gateway_kit.execution.decider import HeartbeatDecider
from gateway_kit.execution.tmux import TmuxError
from gateway_kit.hooks import PluginContext, Plugins
from gateway_kit.identity.tokens import ApiTokens
from tests.support.serving import serve_in_thread
from tests.support.tmux_server import TmuxServer
from tests.support.waiting import wait_until

from .agent_api import Pace, agent_api


def source(key: str) -> str:
    from tests.support.screens.sources import SCREENS as SOURCES

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
    assert decide(tmux_session_id="shell") == "skip"  # not read as idle: might be a prompt
    assert decide(tmux_session_id="gone") == "skip"


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


def test_no_request_makes_the_heartbeat_type_into_a_permission_prompt(
    server: TmuxServer, log: EventLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo = tmp_path / "typed.txt"
    server.start_agent("agent-1", source("claude_code/permission-bash"), echo=echo)
    claims_of(log).claim("agent-1", "alice")
    alice = {"authorization": f"Bearer {ApiTokens(log).create('alice')[1]}"}
    pane = {"tmux_pane": {"socket_name": server.socket_name, "hold": 0.2}}
    pace = Pace()
    gateway = Gateway(agent_api(pace), log=log, plugin_config=pane, load_entry_points=False)
    # What `gateway-kit heartbeat agent-1 --message "carry on"` does each round.
    rounds = HeartbeatDecider(log, Plugins(config=pane, context=PluginContext(log=log)))

    def heartbeat_round() -> str:
        assert not one_round(rounds, server.tmux, "agent-1", "carry on", as_json=False)
        return capsys.readouterr().out

    with serve_in_thread(gateway) as base, httpx.Client(base_url=base) as client:
        assert "skip (fallback, state UNKNOWN)" in heartbeat_round()
        # Anyone naming the session: unheard.
        assert client.get("/status", headers={"X-Tmux-Session-Id": "agent-1"}).is_success
        assert "skip (fallback, state UNKNOWN)" in heartbeat_round()
        # The agent's own answer ended with stop: the traffic says idle, the pane says asking.
        body = {"finish_reason": "stop"}
        agent = {**alice, "X-Tmux-Session-Id": "agent-1"}
        assert client.post("/v1/chat/completions", json=body, headers=agent).is_success
        decided = client.get("/gateway/heartbeat/agent-1", headers=alice).json()
        assert (decided["state"], decided["decision"], decided["reason"]) == (
            "IDLE",
            "skip",
            "pane_not_idle",
        )
        assert "skip (pane_not_idle, state IDLE)" in heartbeat_round()
    pace.release()
    assert not echo.exists()  # nothing was ever typed into the prompt


def test_an_idle_pane_of_the_holders_idle_agent_gets_the_heartbeat(
    server: TmuxServer, log: EventLog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo = tmp_path / "typed.txt"
    server.start_agent("agent-2", source("claude_code/idle-prompt"), echo=echo)
    claims_of(log).claim("agent-2", "alice")
    alice = {"authorization": f"Bearer {ApiTokens(log).create('alice')[1]}"}
    pane = {"tmux_pane": {"socket_name": server.socket_name, "hold": 0.2}}
    gateway = Gateway(agent_api(Pace()), log=log, plugin_config=pane, load_entry_points=False)
    rounds = HeartbeatDecider(log, Plugins(config=pane, context=PluginContext(log=log)))
    with serve_in_thread(gateway) as base, httpx.Client(base_url=base) as client:
        agent = {**alice, "X-Tmux-Session-Id": "agent-2"}
        body = {"finish_reason": "stop"}
        assert client.post("/v1/chat/completions", json=body, headers=agent).is_success
        decided = client.get("/gateway/heartbeat/agent-2", headers=alice).json()
        assert (decided["decision"], decided["reason"], decided["evidence"]["pane"]) == (
            "allow",
            "response_stop",
            "allow",
        )
        assert not one_round(rounds, server.tmux, "agent-2", "carry on", as_json=False)
    assert "allow (response_stop, state IDLE)" in capsys.readouterr().out
    wait_until(lambda: echo.exists() and echo.read_text(encoding="utf-8").endswith("\n"))
    assert echo.read_text(encoding="utf-8") == "carry on\n"
