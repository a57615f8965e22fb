"""`Tmux` before it reaches a server: targets it refuses, a tmux that is missing or hangs."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway_kit.execution.tmux import MAX_TARGET, Tmux, TmuxError


@pytest.mark.parametrize(
    "target", ["", "agent\n1", "agent\x1b[A", "agent\t", "a" * (MAX_TARGET + 1)]
)
def test_a_target_that_is_no_name_is_refused_without_running_tmux(target: str) -> None:
    tmux = Tmux(binary="/nonexistent/tmux")  # running it would fail differently
    with pytest.raises(TmuxError, match="non-empty line"):
        tmux.pane_id(target)
    with pytest.raises(TmuxError, match="non-empty line"):
        tmux.has_session(target)


def test_a_missing_tmux_is_a_tmux_error_naming_it() -> None:
    with pytest.raises(TmuxError, match="tmux not found: '/nonexistent/tmux'"):
        Tmux(binary="/nonexistent/tmux").capture("agent")


def test_a_tmux_that_does_not_answer_in_time_is_a_tmux_error(tmp_path: Path) -> None:
    hanging = tmp_path / "tmux"
    hanging.write_text("#!/bin/sh\nexec sleep 60\n")
    hanging.chmod(0o755)
    with pytest.raises(TmuxError, match=r"timed out after 0\.2s"):
        Tmux(binary=str(hanging), timeout=0.2).capture("agent")


def test_text_that_is_not_one_plain_line_is_refused_before_tmux_runs() -> None:
    tmux = Tmux(binary="/nonexistent/tmux")
    for text in ("a\nb", "a\rb", "a\u2028b", "\x1b[201~"):
        with pytest.raises(ValueError, match="one line without control characters"):
            tmux.send_text("agent", text)


def test_the_server_is_chosen_by_socket_path_or_name() -> None:
    assert Tmux(socket_name="work").server == ("-L", "work")
    assert Tmux(socket_path="/tmp/t.sock").server == ("-S", "/tmp/t.sock")
    assert Tmux().server == ()
