"""The command line as a user types it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main

EXE = [sys.executable, "-m", "gateway_kit.cli"]


def test_db_upgrade_creates_then_reports_up_to_date(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--db", sqlite_url]) == 0
    assert "upgraded from an empty database" in capsys.readouterr().out
    assert main(["db", "upgrade", "--db", sqlite_url]) == 0
    assert "already at revision" in capsys.readouterr().out


def test_db_url_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/from-env.db"
    monkeypatch.setenv("GATEWAY_KIT_DB", url)
    assert main(["db", "upgrade"]) == 0
    assert url in capsys.readouterr().out


def test_db_prune_refuses_a_bad_age(sqlite_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["db", "prune", "--older-than", "soon", "--db", sqlite_url])
    assert exit_info.value.code == 2
    assert "not an age such as 30d" in capsys.readouterr().err


def test_tail_refuses_a_negative_cursor(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["tail", "conv", "--after", "-4"])
    assert "non-negative integer" in capsys.readouterr().err


def test_tail_prints_events_as_they_arrive_until_ctrl_c(log_url: str) -> None:
    with EventLog(log_url) as log:
        first = log.append("conv", "Message", {"text": "before"})
        log.append("other", "Message", {"text": "not this stream"})
        proc = subprocess.Popen(
            [*EXE, "tail", "conv", "--db", log_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        assert proc.stdout is not None
        try:
            assert proc.stdout.readline().startswith("# conv in")
            assert '"before"' in proc.stdout.readline()
            log.append("conv", "Message", {"text": "live 😀"})
            line = proc.stdout.readline()
            assert '"live 😀"' in line and " #2 Message" in line
        finally:
            time.sleep(0.1)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130
        assert "not this stream" not in out
        assert "Traceback" not in err
        assert first.seq > 0
