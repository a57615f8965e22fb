"""What the command line says when it cannot do what it was asked: one line on stderr, a
non-zero exit, never a traceback."""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from tests.support.waiting import wait_until

EXE = [sys.executable, "-m", "gateway_kit.cli"]
COMMANDS = [["db", "upgrade"], ["tokens", "list"], ["tail", "conv"], ["bills"]]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # nobody listens there once the socket is closed


def unreachable(kind: str, pg_url: str, tmp_path: Path) -> tuple[str, str]:
    """A database URL that cannot be used, and what the error must say."""
    if kind == "closed-port":
        return f"postgresql+psycopg://postgres:secret@127.0.0.1:{closed_port()}/test", "refused"
    if kind == "missing-database":
        name = f"gk_missing_{uuid.uuid4().hex[:8]}"
        return pg_url.replace("/test?", f"/{name}?"), f'database "{name}" does not exist'
    (tmp_path / "a-file").write_text("not a folder")
    return f"sqlite:///{tmp_path}/a-file/gateway.db", "unable to open database file"


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
@pytest.mark.parametrize("kind", ["closed-port", "missing-database", "unwritable-sqlite-path"])
def test_a_database_that_cannot_be_reached_is_one_line_without_a_traceback(
    kind: str,
    command: list[str],
    pg_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, reason = unreachable(kind, pg_url, tmp_path)
    assert main([*command, "--db", url]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1, err
    name = " ".join(command[:2]) if command[0] in ("db", "tokens") else command[0]
    assert err.startswith(f"gateway-kit {name}: cannot use the database ")
    assert reason in err
    assert "secret" not in err  # a password is never printed


def test_a_traceback_never_reaches_the_terminal(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    url = f"sqlite:///{tmp_path}/a-file/gateway.db"
    done = subprocess.run([*EXE, "tokens", "list", "--db", url], capture_output=True, text=True)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1


def test_postgres_urls_are_accepted_like_postgresql_ones(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    short = pg_url.replace("postgresql+psycopg://", "postgres://", 1)
    assert main(["db", "upgrade", "--db", short]) == 0
    assert "upgraded from an empty database" in capsys.readouterr().out
    assert main(["tokens", "create", "alice", "--quiet", "--db", short]) == 0
    for url in (short, pg_url.replace("postgresql+psycopg://", "postgresql://", 1)):
        with EventLog(url) as log:
            log.append("conv", "Message", {"via": url})
    with EventLog(pg_url) as log:  # readers see a commit once it is settled
        wait_until(lambda: len(log.read(stream="conv")) == 2)


def test_version_names_the_installed_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    name, version = capsys.readouterr().out.split()
    assert name == "gateway-kit" and version[0].isdigit()
