"""Settings: where the database URL comes from, and the Gateway's tunables checked at start-up."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway_kit import (
    EventLog,
    Gateway,
    GatewaySettings,
    LegacySurfaces,
    SettingsError,
    TaskPollShape,
)
from gateway_kit.settings import DATABASE_URL_VAR, DEFAULT_DATABASE_URL, database_url

GATEWAY_KIT = str(Path(sys.executable).parent / "gateway-kit")


def test_the_database_url_is_the_callers_else_the_environments_else_the_default() -> None:
    assert database_url("sqlite:///given.db", environ={DATABASE_URL_VAR: "sqlite:///env.db"}) == (
        "sqlite:///given.db"
    )
    assert database_url(None, environ={DATABASE_URL_VAR: "sqlite:///env.db"}) == "sqlite:///env.db"
    assert database_url(None, environ={DATABASE_URL_VAR: ""}) == DEFAULT_DATABASE_URL
    assert database_url(None, environ={}) == DEFAULT_DATABASE_URL
    assert database_url("postgresql+psycopg://u@h/db", environ={}) == "postgresql+psycopg://u@h/db"


@pytest.mark.parametrize("url", ["gateway.db", "mysql://u@h/db", "postgresql://", "sqlite", ""])
def test_a_database_url_that_cannot_work_names_where_it_came_from(url: str) -> None:
    environ = {DATABASE_URL_VAR: url or "redis://localhost"}
    with pytest.raises(SettingsError, match=r"\$GATEWAY_KIT_DB: .*sqlite:///PATH"):
        database_url(None, environ=environ)
    if url:
        with pytest.raises(SettingsError, match="--db"):
            database_url(url, source="--db", environ={})
        with pytest.raises(SettingsError, match=r"EventLog\(url\)"):
            EventLog(url)


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("ping_interval", 0),
        ("send_timeout", -1.0),
        ("send_timeout", float("nan")),
        ("plugin_timeout", "5"),
        ("queue_size", 0),
        ("wsgi_workers", 2.5),
        ("max_body_bytes", True),
        ("prefix", "gateway"),
        ("prefix", "/"),
        ("working_dir", ""),
        ("owned_run_sweep_interval", 0),
        ("ticket_ttl", 0),
        ("ticket_rate", (0, 10.0)),
        ("ticket_rate", 5),
        ("socket_origins", "https://app.example.com"),
        ("socket_origins", ["app.example.com"]),
        ("reply_timeout", 0),
        ("reply_timeout", float("inf")),
        ("cancel_deadline", -1),
        ("cancel_deadline", "30"),
        ("max_run_duration", 0),
        ("max_run_duration", float("nan")),
        ("max_run_duration", True),
        ("plugin_hung_limit", 0),
        ("plugin_hung_limit", 2.5),
        ("body_timeout", 0),
        ("body_timeout", float("inf")),
        ("max_page_bytes", 0),
        ("max_page_bytes", 4.5),
        ("max_message_bytes", -1),
        ("max_message_bytes", "256k"),
        ("credential_refresh_interval", 0),
        ("credential_stale_after", 0.1),  # not longer than the refresh interval
    ],
)
def test_a_gateway_setting_that_cannot_work_is_refused_naming_it(
    sqlite_url: str, setting: str, value: object
) -> None:
    with pytest.raises(SettingsError, match=setting):
        GatewaySettings(**{setting: value})  # type: ignore[arg-type]
    with EventLog(sqlite_url) as log, pytest.raises(SettingsError, match=setting):
        Gateway(log=log, **{setting: value}, allow_anonymous=True)  # type: ignore[arg-type]


def test_every_gateway_setting_is_a_gateway_parameter() -> None:
    parameters = inspect.signature(Gateway).parameters
    assert set(GatewaySettings.names()) <= set(parameters)
    for name in GatewaySettings.names():
        assert parameters[name].default == getattr(GatewaySettings(), name), name


def test_paths_lose_their_trailing_slash() -> None:
    assert GatewaySettings(prefix="/gk/").prefix == "/gk"
    assert LegacySurfaces(tasks="/api/tasks/").tasks == "/api/tasks"


@pytest.mark.parametrize(
    ("surfaces", "said"),
    [
        ({"tasks": "api/tasks"}, "legacy tasks must start with '/'"),
        ({"socket_token": "api/socket-token"}, "legacy socket_token must start with '/'"),
        ({"socketio": "socket.io"}, "legacy socketio must start with '/'"),
        ({"usage": "/"}, "legacy usage must start with '/'"),
        ({"usage": "/api/x", "approvals": "/api/x/"}, "given to two legacy surfaces"),
        ({"task_shape": {"answer": None}}, "must be a TaskPollShape"),
        ({"csrf_token_route": 7}, "legacy csrf_token_route"),
    ],
)
def test_a_legacy_surface_that_cannot_work_is_refused_naming_it(
    surfaces: dict[str, object], said: str
) -> None:
    with pytest.raises(SettingsError, match=re.escape(said)):
        LegacySurfaces(**surfaces)  # type: ignore[arg-type]


def test_legacy_surfaces_are_given_one_way_and_outside_the_prefix(sqlite_url: str) -> None:
    with EventLog(sqlite_url) as log:
        with pytest.raises(SettingsError, match="legacy_usage_path; give them in legacy= alone"):
            Gateway(
                log=log,
                legacy=LegacySurfaces(tasks="/api/tasks"),
                legacy_usage_path="/api/usage",
            )
        with pytest.raises(SettingsError, match="under the gateway's own prefix"):
            Gateway(log=log, legacy=LegacySurfaces(usage="/gateway/usage"))


@pytest.mark.parametrize(
    ("shape", "said"),
    [
        ({"answer": "not a function"}, "answer=...) must be a function"),
        ({"offset_param": ""}, "offset_param=...) must be a non-empty string"),
        ({"not_found": (999, {})}, "not_found=...) must be (an HTTP status"),
        ({"unauthenticated": "no"}, "unauthenticated=...) must be (an HTTP status"),
    ],
)
def test_a_task_shape_that_cannot_work_is_refused_naming_it(
    shape: dict[str, object], said: str
) -> None:
    with pytest.raises(SettingsError, match=re.escape(said)):
        TaskPollShape(**shape)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("env", "args", "named"),
    [
        ({DATABASE_URL_VAR: "not-a-url"}, ["db", "upgrade"], "$GATEWAY_KIT_DB"),
        ({}, ["tail", "conv", "--db", "mysql://x"], "--db"),
    ],
)
def test_the_command_line_names_the_bad_setting(
    env: dict[str, str], args: list[str], named: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [GATEWAY_KIT, *args],
        env={"PATH": "/usr/bin:/bin", **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert named in done.stderr and "sqlite:///PATH" in done.stderr
    assert "Traceback" not in done.stderr
