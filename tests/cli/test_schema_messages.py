"""What a command says when it creates or upgrades gateway_kit's tables: the database, and
revisions a person can look up, never Python's ``None`` or Alembic's ``head``."""

from __future__ import annotations

import logging

import pytest

from gateway_kit.cli import main
from gateway_kit.log import migrate
from gateway_kit.log.schema import HEAD_REVISION

OLDER_REVISION = "0013"


def said(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "gateway_kit.log.migrate"]


def test_a_new_database_is_said_to_get_its_schema(
    sqlite_url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="gateway_kit.log")
    assert main(["tokens", "list", "--db", sqlite_url]) == 0
    assert said(caplog) == [f"creating the schema of {sqlite_url} (revision {HEAD_REVISION})"]


def test_an_older_database_is_said_to_be_upgraded_from_its_revision(
    sqlite_url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate.upgrade(sqlite_url, OLDER_REVISION)
    caplog.set_level(logging.INFO, logger="gateway_kit.log")
    assert main(["db", "upgrade", "--db", sqlite_url]) == 0
    assert said(caplog) == [
        f"upgrading the schema of {sqlite_url} from revision {OLDER_REVISION} to {HEAD_REVISION}"
    ]
    assert f"upgraded from {OLDER_REVISION} to {HEAD_REVISION}" in capsys.readouterr().out


def test_the_schema_message_hides_a_password(
    pg_url: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="gateway_kit.log")
    with_password = pg_url.replace("postgres@", "postgres:hunter2@", 1)
    assert main(["bills", "--db", with_password]) == 0
    [line] = said(caplog)
    assert line.startswith("creating the schema of postgresql+psycopg://postgres:***@")
    assert "hunter2" not in line
