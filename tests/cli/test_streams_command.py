"""``gateway-kit streams owner``: the owner of data written before the app declared owners."""

from __future__ import annotations

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.identity.owners import StreamOwners


def test_streams_owner_gives_a_stream_written_with_no_owner_to_its_user(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        log.append("conv-1", "Message", {"text": "written before owners were declared"})

    assert main(["streams", "owner", "conv-1", "alice", "--db", log_url]) == 0
    out = capsys.readouterr().out
    assert "'conv-1' is owned by 'alice' (before: none)" in out
    with EventLog(log_url) as log:
        assert StreamOwners(log).owner("conv-1") == "alice"

    # Again: nothing to change, and it says so.
    assert main(["streams", "owner", "conv-1", "alice", "--db", log_url]) == 0
    assert "owned by 'alice' already" in capsys.readouterr().out


def test_streams_owner_keeps_another_users_stream_unless_forced(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        StreamOwners(log).declare("conv-2", "alice")

    assert main(["streams", "owner", "conv-2", "bob", "--db", log_url]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    [line] = captured.err.splitlines()  # one line, no traceback
    assert "owned by 'alice', not 'bob'" in line and "--force" in line
    with EventLog(log_url) as log:
        assert StreamOwners(log).owner("conv-2") == "alice"

    assert main(["streams", "owner", "conv-2", "bob", "--force", "--db", log_url]) == 0
    assert "(before: 'alice') (it holds no event yet)" in capsys.readouterr().out
    with EventLog(log_url) as log:
        assert StreamOwners(log).owner("conv-2") == "bob"


@pytest.mark.parametrize(
    ("stream", "user"), [("conv", "u" * 201), ("conv", "a\nb"), ("", "alice"), ("s" * 201, "x")]
)
def test_streams_owner_refuses_what_cannot_be_stored_in_one_line(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], stream: str, user: str
) -> None:
    assert main(["streams", "owner", stream, user, "--db", sqlite_url]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert len(captured.err.splitlines()) == 1
    assert captured.err.startswith("gateway-kit streams owner: ")
    with EventLog(sqlite_url) as log:
        assert StreamOwners(log).owner(stream) is None
