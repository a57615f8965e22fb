"""``gateway-kit plugins``: the loaded plugins, where each comes from, and its hooks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GATEWAY_KIT = str(Path(sys.executable).parent / "gateway-kit")

APP_MODULE = """
from gateway_kit import EventLog, Gateway, hookimpl


class TeamPolicy:
    __name__ = "team-policy"

    @hookimpl
    def authorize_subscription(self, principal, stream):
        return None

    @hookimpl
    def classify_error(self, error, run):
        return None


app = Gateway(
    log=EventLog("sqlite:///{db}"), plugins=[TeamPolicy()], load_entry_points=False
)
not_a_gateway = object()
"""


FROM_THE_ENVIRONMENT = """
from gateway_kit import EventLog, Gateway
from gateway_kit.settings import database_url

app = Gateway(log=EventLog(database_url()), load_entry_points=False)
"""


def plugins_command(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GATEWAY_KIT, "plugins", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


BUILT_INS = (
    "bearer_identity",
    "default_authorization",
    "flask_session_identity",
    "host_identity",
    "publish_guard",
    "tmux_pane",
    "tmux_session_resolver",
    "tool_history_recovery",
    "transient_retry",
    "usage_ledger",
    "visual_fallback",
)


def test_a_gateways_plugins_are_listed_with_where_they_come_from(tmp_path: Path) -> None:
    (tmp_path / "deployment.py").write_text(APP_MODULE.format(db=tmp_path / "gateway.db"))
    listed = plugins_command("deployment:app", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "FROM", "HOOKS"]
    by_name = {row.split()[0]: row for row in rows}
    assert set(by_name) == {*BUILT_INS, "team-policy"}
    assert "built-in (gateway-kit " in by_name["default_authorization"]
    assert by_name["team-policy"].split(None, 1)[1].startswith("passed in")
    assert by_name["team-policy"].endswith("authorize_subscription, classify_error")

    as_json = plugins_command("deployment:app", "--json", cwd=tmp_path)
    records = {r["name"]: r for r in map(json.loads, as_json.stdout.splitlines())}
    assert records["team-policy"] == {
        "name": "team-policy",
        "from": "passed in",
        "distribution": None,
        "version": None,
        "hooks": ["authorize_subscription", "classify_error"],
    }


def test_without_an_app_the_installed_plugins_are_listed_and_can_be_blocked(
    tmp_path: Path,
) -> None:
    listed = plugins_command("--no-entry-points", cwd=tmp_path)
    assert [row.split()[0] for row in listed.stdout.splitlines()[1:]] == list(BUILT_INS)
    blocking = [arg for name in BUILT_INS for arg in ("--block", name)]
    blocked = plugins_command("--no-entry-points", *blocking, cwd=tmp_path)
    assert blocked.stdout.splitlines()[1:] == []


def test_what_is_not_a_gateway_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "deployment.py").write_text(APP_MODULE.format(db=tmp_path / "gateway.db"))
    for spec, said in (
        ("deployment:not_a_gateway", "is not a Gateway"),
        ("deployment:missing", "has no attribute"),
        ("nowhere:app", "cannot import"),
    ):
        failed = plugins_command(spec, cwd=tmp_path)
        assert failed.returncode == 2 and said in failed.stderr, failed.stderr


def test_blocking_a_plugin_that_is_not_installed_is_an_error(tmp_path: Path) -> None:
    refused = plugins_command("--block", "flask_sesion_identity", cwd=tmp_path)
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.count("\n") == 1, refused.stderr
    assert "--block 'flask_sesion_identity': no installed plugin has that name" in refused.stderr
    assert "flask_session_identity" in refused.stderr.split("installed:")[1]


def test_flags_that_cannot_change_a_built_gateway_are_an_error(tmp_path: Path) -> None:
    (tmp_path / "deployment.py").write_text(APP_MODULE.format(db=tmp_path / "gateway.db"))
    for flags in (["--block", "team-policy"], ["--no-entry-points"]):
        refused = plugins_command("deployment:app", *flags, cwd=tmp_path)
        assert refused.returncode == 2 and refused.stdout == ""
        assert f"{flags[0]} cannot change the plugins of deployment:app" in refused.stderr


def test_listing_the_plugins_of_a_gateway_creates_no_database(tmp_path: Path) -> None:
    # The module builds its log as the contract's default does: $GATEWAY_KIT_DB, else the
    # gateway.db of the current directory.
    (tmp_path / "deployment.py").write_text(FROM_THE_ENVIRONMENT)
    unset = {k: v for k, v in os.environ.items() if k != "GATEWAY_KIT_DB"}
    named = {**unset, "GATEWAY_KIT_DB": f"sqlite:///{tmp_path}/named.db"}
    for env in (unset, named):
        listed = plugins_command("deployment:app", cwd=tmp_path, env=env)
        assert listed.returncode == 0, listed.stderr
        assert "publish_guard" in listed.stdout
        assert {p.name for p in tmp_path.iterdir()} - {"__pycache__"} == {"deployment.py"}
