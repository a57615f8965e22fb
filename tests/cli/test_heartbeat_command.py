"""``gateway-kit heartbeat``: the decision, its reason, and a message typed into a real tmux
pane only when it is an allow."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.execution.decision_log import DecisionLog
from gateway_kit.execution.request_rows import RequestRows
from gateway_kit.execution.state import RequestRecord
from tests.support.screens.sources import SCREENS
from tests.support.tmux_server import TmuxServer
from tests.support.waiting import wait_until

AGENT = "agent-1"
MESSAGE = "carry on C-c"  # typed as it is: tmux key names in it stay text


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[TmuxServer]:
    server = TmuxServer(tmp_path)
    yield server
    server.kill()


def heartbeat(log_url: str, tmux: TmuxServer, *extra: str) -> int:
    return main(
        [
            "heartbeat",
            AGENT,
            "--message",
            MESSAGE,
            "--tmux-socket",
            tmux.socket_name,
            "--db",
            log_url,
            *extra,
        ]
    )


def observed(log: EventLog, *, ended: bool, sse: bool = False) -> None:
    """A request of `AGENT` as a live gateway process wrote it a moment ago."""
    now = time.time()
    record = RequestRecord(
        "r1",
        AGENT,
        "gateway-1",
        "POST",
        "/v1/chat/completions",
        started_at=now - 2,
        sse_opened_at=now - 1.9 if sse else None,
        ended_at=now - 1 if ended else None,
        outcome="completed" if ended else None,
        finish_reason="stop" if ended else None,
        terminal_at=now - 1 if ended else None,
    )
    RequestRows(log).write([record], process="gateway-1", now=now)


def typed(echo: Path) -> list[str]:
    return echo.read_text().splitlines() if echo.exists() else []


def test_an_idle_session_gets_the_message(
    log: EventLog,
    log_url: str,
    tmux: TmuxServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo = tmp_path / "typed"
    tmux.start_agent(AGENT, SCREENS["claude_code/idle-prompt"], echo=echo)
    observed(log, ended=True)
    assert heartbeat(log_url, tmux) == 0
    out = capsys.readouterr().out
    assert f"{AGENT}: allow (response_stop, state IDLE)" in out and "message sent" in out
    wait_until(lambda: typed(echo) == [MESSAGE])


def test_a_streaming_session_is_left_alone(
    log: EventLog,
    log_url: str,
    tmux: TmuxServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo = tmp_path / "typed"
    # The pane looks idle: what the gateway saw decides, not the pane.
    tmux.start_agent(AGENT, SCREENS["claude_code/idle-prompt"], echo=echo)
    observed(log, ended=False, sse=True)
    assert heartbeat(log_url, tmux, "--json") == 0
    decision = json.loads(capsys.readouterr().out)
    assert (decision["decision"], decision["reason"], decision["sent"]) == (
        "skip",
        "sse_open",
        False,
    )
    recorded = DecisionLog(log).recent(AGENT)
    assert [d["reason"] for d in recorded] == ["sse_open"]
    assert typed(echo) == []


@pytest.mark.parametrize(
    ("screen", "decision"),
    [
        ("goose/busy-thinking", "skip"),
        ("codex/permission-command", "skip"),
        ("aider/idle-prompt", "allow"),
    ],
)
def test_a_session_nothing_was_seen_of_is_read_from_its_pane(
    log_url: str,
    tmux: TmuxServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    screen: str,
    decision: str,
) -> None:
    echo = tmp_path / "typed"
    tmux.start_agent(AGENT, SCREENS[screen], echo=echo)
    assert heartbeat(log_url, tmux, "--json") == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["state"] == "UNKNOWN"
    expected_reason = "fallback"
    assert (answer["decision"], answer["reason"]) == (decision, expected_reason)
    if decision == "allow":
        wait_until(lambda: typed(echo) == [MESSAGE])
    else:
        assert typed(echo) == []


def test_every_asks_again_and_prints_each_decision(
    log: EventLog, log_url: str, tmux: TmuxServer, capsys: pytest.CaptureFixture[str]
) -> None:
    tmux.start_agent(AGENT, SCREENS["codex/busy-working"])
    observed(log, ended=False)
    assert heartbeat(log_url, tmux, "--every", "50ms", "--count", "3") == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("skip (waiting_response" in line for line in lines)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["agent-1", "--message", "two\nlines"], "--message must be one line"),
        (["agent-1", "--message", "hi", "--every", "soon"], "--every must be a duration"),
        (["agent-1", "--message", "hi", "--every", "0s"], "--every must be a duration"),
        (["bad\tname", "--message", "hi"], "a tmux session id is"),
        (["agent-1", "--message", "hi", "--every", "1s", "--count", "0"], "--count"),
    ],
)
def test_careless_input_is_one_line_and_nothing_is_decided(
    log: EventLog, log_url: str, capsys: pytest.CaptureFixture[str], args: list[str], says: str
) -> None:
    assert main(["heartbeat", *args, "--db", log_url]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert DecisionLog(log).recent("agent-1") == []


def test_a_session_tmux_does_not_have_is_never_typed_into(
    log: EventLog, log_url: str, tmux: TmuxServer, capsys: pytest.CaptureFixture[str]
) -> None:
    tmux.start_agent("someone-else", SCREENS["aider/idle-prompt"])
    observed(log, ended=True)  # the traffic would allow; the pane cannot be read
    assert heartbeat(log_url, tmux) == 0
    captured = capsys.readouterr()
    assert f"{AGENT}: skip (pane_not_idle, state IDLE)" in captured.out
    assert "message sent" not in captured.out


def test_a_session_showing_a_permission_prompt_is_never_typed_into(
    log: EventLog,
    log_url: str,
    tmux: TmuxServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo = tmp_path / "typed"
    tmux.start_agent(AGENT, SCREENS["claude_code/permission-bash"], echo=echo)
    observed(log, ended=True)  # the last answer ended with stop: the traffic says idle
    assert heartbeat(log_url, tmux, "--count", "2", "--every", "1s") == 0
    out = capsys.readouterr().out
    assert out.count(f"{AGENT}: skip (pane_not_idle, state IDLE)") == 2, out
    assert typed(echo) == []
