"""``--json`` on the commands that do something: one JSON object on stdout saying what was done,
nothing else there; errors stay one line on stderr."""

from __future__ import annotations

import json
from typing import Any

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from gateway_kit.log.schema import HEAD_REVISION


def one_document(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """What the command printed: exactly one JSON object, on one line of stdout."""
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.endswith("\n"), out
    document = json.loads(out)
    assert isinstance(document, dict)
    return document


def test_db_upgrade_json_says_which_revision_it_came_from(
    sqlite_url: str, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["db", "upgrade", "--json", "--db", sqlite_url]) == 0
    assert one_document(capsys) == {
        "database": sqlite_url,
        "before": None,
        "revision": HEAD_REVISION,
        "upgraded": True,
    }
    assert main(["db", "upgrade", "--json", "--db", sqlite_url]) == 0
    assert one_document(capsys)["before"] == HEAD_REVISION
    # A password in the URL is never printed (the server trusts the connection anyway).
    with_password = pg_url.replace("postgres@", "postgres:hunter2@", 1)
    assert main(["db", "upgrade", "--json", "--db", with_password]) == 0
    shown = one_document(capsys)
    assert "hunter2" not in shown["database"] and shown["upgraded"] is True


def test_db_prune_json_says_what_it_would_delete_then_what_it_deleted(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        log.append("conv", "Message", {"text": "hello"}, run_id="r-1")
        log.end_run("conv", "Finish", run_id="r-1")
        log.append("notes", "Note", {"text": "no run: never pruned"})
        prune = ["db", "prune", "--older-than", "0s", "--json", "--db", log_url]
        assert main([*prune, "--dry-run"]) == 0
        planned = one_document(capsys)
        assert planned == {
            "dry_run": True,
            "older_than_seconds": 0,
            "events": 3,
            "runs": 1,
            "would_delete": 2,
            "deleted": 0,
        }
        assert main(prune) == 0
        assert one_document(capsys) == {**planned, "dry_run": False, "deleted": 2}
        assert log.read(stream="conv", settled=False) == []


def test_db_prune_json_refusing_to_empty_the_log_prints_no_json(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(sqlite_url) as log:
        log.append("conv", "Message", {"text": "hello"}, run_id="r-1")
        log.end_run("conv", "Finish", run_id="r-1")
    assert main(["db", "prune", "--older-than", "0s", "--json", "--db", sqlite_url]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "--yes" in err


def test_tokens_revoke_json_says_whether_it_was_revoked_already(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(sqlite_url) as log:
        record, _ = ApiTokens(log).create("alice", scopes=["read"])
    revoke = ["tokens", "revoke", record.token_id, "--json", "--db", sqlite_url]
    assert main(revoke) == 0
    first = one_document(capsys)
    assert first["token_id"] == record.token_id and first["user_id"] == "alice"
    assert first["scopes"] == ["read"] and first["revoked_at"] is not None
    assert first["already_revoked"] is False
    assert main(revoke) == 0
    again = one_document(capsys)
    assert again["already_revoked"] is True and again["revoked_at"] == first["revoked_at"]
    assert main(["tokens", "revoke", "no-such-token", "--json", "--db", sqlite_url]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1


def test_streams_owner_json_says_who_owned_it_before(
    log_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(log_url) as log:
        log.append("conv", "Message", {"text": "written before owners were declared"})
    owner = ["streams", "owner", "conv", "alice", "--json", "--db", log_url]
    assert main(owner) == 0
    assert one_document(capsys) == {
        "stream": "conv",
        "owner": "alice",
        "before": None,
        "changed": True,
        "written": True,
    }
    assert main(owner) == 0
    assert one_document(capsys)["changed"] is False
    assert main(["streams", "owner", "conv", "bob", "--json", "--db", log_url]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "--force" in err and err.count("\n") == 1
    assert main(["streams", "owner", "empty", "bob", "--force", "--json", "--db", log_url]) == 0
    assert one_document(capsys)["written"] is False
    with EventLog(log_url) as log:
        assert StreamOwners(log).owner("conv") == "alice"
