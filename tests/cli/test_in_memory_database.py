"""``--db sqlite:///`` (an in-memory database) refused, in one line, by every command whose
result would vanish with it or that could read nothing from it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gateway_kit.cli import main

EXE = [sys.executable, "-m", "gateway_kit.cli"]
IN_MEMORY = ["sqlite://", "sqlite:///", "sqlite:///:memory:"]
COMMANDS = [
    ["db", "upgrade"],
    ["db", "prune", "--older-than", "30d"],
    ["tokens", "create", "alice"],
    ["tokens", "list"],
    ["tokens", "revoke", "a-token-id"],
    ["streams", "owner", "conv", "alice"],
    ["bills"],
    ["heartbeat", "agent-1", "--message", "carry on"],
]


@pytest.mark.parametrize("url", IN_MEMORY)
@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_a_command_whose_result_would_vanish_refuses_an_in_memory_database(
    command: list[str], url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--db", url]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    name = " ".join(command[:2]) if command[0] in ("db", "tokens", "streams") else command[0]
    assert line.startswith(f"gateway-kit {name}: --db {url} is an in-memory database")
    assert "sqlite:///gateway.db" in line  # what to give instead


def test_an_in_memory_database_from_the_environment_is_refused_too(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GATEWAY_KIT_DB", "sqlite://")
    assert main(["tokens", "create", "alice", "--quiet"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "the token would vanish" in err


def test_tail_refuses_an_in_memory_database_instead_of_waiting_for_ever() -> None:
    for args in (["conv"], ["conv", "--until-finish", "r-1"]):
        try:
            done = subprocess.run(
                [*EXE, "tail", *args, "--db", "sqlite:///"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except subprocess.TimeoutExpired:
            raise AssertionError("tail waited on a database nothing else can write") from None
        assert done.returncode == 2 and done.stdout == ""
        assert "in-memory database" in done.stderr and len(done.stderr.splitlines()) == 1
