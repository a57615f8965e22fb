"""The command line as a user types it."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_kit import EventLog, Run, RunStatus, owned_run
from gateway_kit.cli import main
from gateway_kit.runs.store import RunStore

EXE = [sys.executable, "-m", "gateway_kit.cli"]
STOP_TIMEOUT = 20.0  # far more than a stop takes; a tail that ignores SIGINT takes for ever
# Run as `python -c IGNORING_SIGINT COMMAND...`: COMMAND with SIGINT ignored, as a shell starts
# a background job.
IGNORING_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)


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


@contextlib.contextmanager
def tail_process(*args: str, sigint_ignored: bool = False) -> Iterator[subprocess.Popen[str]]:
    """`gateway-kit tail ARGS` in a process of its own, killed when the block ends however it
    ends. With `sigint_ignored` it starts as a shell's background job does: SIGINT ignored,
    which the exec keeps."""
    command = [*EXE, "tail", *args]
    if sigint_ignored:
        command = [sys.executable, "-c", IGNORING_SIGINT, *command]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


def ctrl_c(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGINT, then what the process wrote after; fails if it is still running after
    `STOP_TIMEOUT` (the caller's `tail_process` kills it)."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.communicate(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError("tail did not stop on SIGINT") from None


@pytest.mark.parametrize("sigint_ignored", [False, True], ids=["terminal", "background-job"])
def test_tail_prints_events_as_they_arrive_until_ctrl_c(log_url: str, sigint_ignored: bool) -> None:
    with EventLog(log_url) as log:
        log.append("conv", "Message", {"text": "before"})
        log.append("other", "Message", {"text": "not this stream"})
        with tail_process("conv", "--db", log_url, sigint_ignored=sigint_ignored) as proc:
            assert proc.stdout is not None
            assert proc.stdout.readline().startswith("# conv in")
            assert '"before"' in proc.stdout.readline()
            log.append("conv", "Message", {"text": "live 😀"})
            line = proc.stdout.readline()
            assert '"live 😀"' in line and " Message " in line
            out, err = ctrl_c(proc)
    assert proc.returncode == 130
    assert "not this stream" not in out
    assert "Traceback" not in err


def recorded_run(log: EventLog, run_id: str, stream: str = "conv") -> None:
    """A run the gateway has recorded and not yet written anything of: one about to start."""
    run = Run(
        run_id=run_id,
        stream=stream,
        session_id="session-1",
        upstream_request_id=f"request-of-{run_id}",
        status=RunStatus.ACTIVE,
        attempt=1,
        cancel_requested=False,
        message="hello",
        created_at=0.0,
    )
    RunStore(log).create(run)


def test_tail_until_finish_stops_after_that_runs_end_as_it_arrives(log_url: str) -> None:
    with EventLog(log_url) as log:
        log.append("conv", "Message", {"text": "an earlier run"}, run_id="r-0")
        log.end_run("conv", "Finish", run_id="r-0")  # not the run waited for
        recorded_run(log, "r-1")  # about to start: no event of it yet
        with tail_process("conv", "--until-finish", "r-1", "--json", "--db", log_url) as proc:
            assert proc.stdout is not None
            assert [json.loads(proc.stdout.readline())["run_id"] for _ in range(2)] == ["r-0"] * 2
            log.append("conv", "Message", {"text": "working"}, run_id="r-1")
            log.end_run("conv", "Finish", run_id="r-1")
            log.append("conv", "Message", {"text": "after the end"}, run_id="r-2")
            out, err = proc.communicate(timeout=STOP_TIMEOUT)
    assert proc.returncode == 0
    printed = [json.loads(line) for line in out.splitlines()]
    assert [(e["run_id"], e["type"]) for e in printed] == [("r-1", "Message"), ("r-1", "Finish")]
    assert err.startswith("# conv in")


def test_tail_json_prints_only_json_on_stdout(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(sqlite_url) as log:
        log.append("conv", "Message", {"text": "hi 😀"}, run_id="r-1")
        end = log.end_run("conv", "Error", {"error": "boom"}, run_id="r-1")
    assert end is not None
    assert main(["tail", "conv", "--json", "--until-finish", "r-1", "--db", sqlite_url]) == 0
    out, err = capsys.readouterr()
    envelopes = [json.loads(line) for line in out.splitlines()]
    assert [e["type"] for e in envelopes] == ["Message", "Error"]
    assert envelopes[0]["data"] == {"text": "hi 😀"}
    assert "# conv in" in err
    # A run that ended at or before the cursor: nothing to wait for.
    assert main(["tail", "conv", "--json", "--until-finish", "r-1", "--after", str(end.seq),
                 "--db", sqlite_url]) == 0  # fmt: skip
    out, err = capsys.readouterr()
    assert out == ""
    assert f"run r-1 ended at seq {end.seq}" in err


def test_tail_until_finish_refuses_a_run_of_another_stream(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(sqlite_url) as log:
        log.append("elsewhere", "Message", {"text": "hi"}, run_id="r-1")
    assert main(["tail", "conv", "--until-finish", "r-1", "--db", sqlite_url]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "run 'r-1' belongs to stream 'elsewhere', not 'conv'" in err


def test_tail_until_finish_of_a_run_nobody_knows_says_so_at_once(sqlite_url: str) -> None:
    with EventLog(sqlite_url) as log:
        log.append("conv", "Message", {"text": "hi"}, run_id="r-1")
    for extra in ([], ["--json"]):
        with tail_process("conv", "--until-finish", "r-typo", *extra, "--db", sqlite_url) as proc:
            try:
                out, err = proc.communicate(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                raise AssertionError("tail waited for a run that does not exist") from None
        assert proc.returncode == 1
        assert out == ""
        assert err == "gateway-kit tail: no run 'r-typo' is known: none was started with that " \
            "id, and the log holds nothing of it\n"  # fmt: skip


def test_tail_until_finish_waits_for_an_app_run_that_has_written_nothing_yet(
    log_url: str,
) -> None:
    with EventLog(log_url) as log:
        run = owned_run(log, stream="conv", run_id="r-1")
        run.__enter__()  # its block has begun: the run holds its lease, and wrote nothing
        with tail_process("conv", "--until-finish", "r-1", "--json", "--db", log_url) as proc:
            assert proc.stderr is not None
            assert proc.stderr.readline().startswith("# conv in")  # it waits: no refusal
            run.append("Message", {"text": "at last"})
            run.__exit__(None, None, None)  # the block ends: the run's Finish
            out, _ = proc.communicate(timeout=STOP_TIMEOUT)
    assert proc.returncode == 0
    assert [json.loads(line)["type"] for line in out.splitlines()] == ["Message", "Finish"]


def test_tail_prints_each_events_seq_once(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(sqlite_url) as log:
        log.append("conv", "Message", {"text": "first"}, run_id="r-1")
        end = log.end_run("conv", "Finish", run_id="r-1")
    assert end is not None
    assert main(["tail", "conv", "--until-finish", "r-1", "--db", sqlite_url]) == 0
    _, *lines = capsys.readouterr().out.splitlines()
    # The stream's only events: their positions equal their seqs, and are not printed again.
    assert re.fullmatch(r" +1 \d\d:\d\d:\d\d Message run=r-1 \{\"text\":\"first\"\}", lines[0])
    assert re.fullmatch(rf" +{end.seq} \d\d:\d\d:\d\d Finish run=r-1 \{{\}}", lines[1])
