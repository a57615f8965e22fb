"""``gateway-kit db prune``: a dry run, ages in words, and no emptied log without ``--yes``."""

from __future__ import annotations

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main


def finished_run(log: EventLog, run_id: str) -> None:
    log.append("conv", "Message", {"text": "hello"}, run_id=run_id)
    log.end_run("conv", "Finish", run_id=run_id)


def test_dry_run_says_what_would_go_and_deletes_nothing(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        finished_run(log, "r-1")
        log.append("notes", "Note", {"text": "no run: never pruned"})
        assert main(["db", "prune", "--older-than", "0s", "--dry-run", "--db", log_url]) == 0
        assert capsys.readouterr().out == (
            "would delete 2 of 3 events: those of 1 run finished more than 0 seconds ago\n"
        )
        assert log.read(stream="conv", settled=False) != []
        assert main(["db", "prune", "--older-than", "0s", "--db", log_url]) == 0
        assert capsys.readouterr().out.startswith("deleted 2 events of runs finished")
        assert log.read(stream="conv", settled=False) == []


@pytest.mark.parametrize(
    ("age", "said"),
    [("90m", "1 hour 30 minutes"), ("30d", "30 days"), ("1h", "1 hour"), ("45s", "45 seconds")],
)
def test_ages_are_said_in_human_units(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], age: str, said: str
) -> None:
    assert main(["db", "prune", "--older-than", age, "--db", sqlite_url]) == 0
    assert capsys.readouterr().out == f"deleted 0 events of runs finished more than {said} ago\n"


def test_a_prune_of_every_event_needs_yes(log_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    with EventLog(log_url) as log:
        finished_run(log, "r-1")
        finished_run(log, "r-2")
        assert main(["db", "prune", "--older-than", "0s", "--db", log_url]) == 1
        out, err = capsys.readouterr()
        assert out == "" and err.count("\n") == 1
        assert "deletes every event in the log (4, those of 2 runs" in err and "--yes" in err
        assert len(log.read(settled=False)) == 4  # nothing deleted
        assert main(["db", "prune", "--older-than", "0s", "--yes", "--db", log_url]) == 0
        assert capsys.readouterr().out.startswith("deleted 4 events")
        assert log.read(settled=False) == []
