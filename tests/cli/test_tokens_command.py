"""``gateway-kit tokens`` for scripts: ``--json`` and ``--quiet`` keep stdout to what a script
reads, and revoking twice says so."""

from __future__ import annotations

import json

import pytest

from gateway_kit import EventLog
from gateway_kit.cli import main
from gateway_kit.identity.tokens import ApiTokens, TokenKind


def test_tokens_create_quiet_prints_the_token_alone(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["tokens", "create", "alice", "--quiet", "--db", sqlite_url]) == 0
    out, _ = capsys.readouterr()
    token = out.removesuffix("\n")
    assert "\n" not in token and " " not in token
    with EventLog(sqlite_url) as log:
        record = ApiTokens(log).check(token, TokenKind.API)
    assert record is not None and record.user_id == "alice"


def test_tokens_create_and_list_json_print_only_json(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--scope", "read", "--json", "--db", sqlite_url]
    assert main(["tokens", "create", "alice", *args]) == 0
    out, err = capsys.readouterr()
    created = json.loads(out)
    assert created["user_id"] == "alice" and created["scopes"] == ["read"]
    assert created["token"].startswith("gk_") and created["revoked_at"] is None
    assert "shown this once" in err
    assert main(["tokens", "create", "bob", "--host", "--quiet", "--db", sqlite_url]) == 0
    capsys.readouterr()
    assert main(["tokens", "list", "--json", "--db", sqlite_url]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(t["user_id"], t["kind"]) for t in listed] == [("alice", "api"), ("bob", "host")]
    assert listed[0]["token_id"] == created["token_id"]
    assert all("token" not in t for t in listed)  # the secret is never listed


def test_revoking_a_revoked_token_says_it_already_was(
    sqlite_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventLog(sqlite_url) as log:
        record, _ = ApiTokens(log).create("alice")
    assert main(["tokens", "revoke", record.token_id, "--db", sqlite_url]) == 0
    assert capsys.readouterr().out.startswith(f"revoked {record.token_id} (alice)")
    assert main(["tokens", "revoke", record.token_id, "--db", sqlite_url]) == 0
    out = capsys.readouterr().out
    assert f"{record.token_id} (alice) was already revoked at" in out
    assert "nothing changed" in out
