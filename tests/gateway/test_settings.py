"""Settings: where the database URL comes from, the Gateway's tunables (one options object per
part, checked at start-up), and the old flat keywords that still reach them."""

from __future__ import annotations

import dataclasses
import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gateway_kit import (
    ApprovalSettings,
    EventLog,
    ExecutionSettings,
    Gateway,
    GatewaySettings,
    GooseUpstream,
    HttpSettings,
    LegacySurfaces,
    LifecycleSettings,
    PumpSettings,
    SettingsError,
    StreamSettings,
    TaskPollShape,
)
from gateway_kit.gateway.deprecated import FIELDS, LEGACY, WHOLE, DeprecatedKeywords
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


# Every part's options: (its name in GatewaySettings, a field, a value that cannot work).
BAD_SETTINGS = [
    ("streams", "ping_interval", 0),
    ("streams", "queue_size", 0),
    ("streams", "max_page_bytes", 4.5),
    ("http", "send_timeout", -1.0),
    ("http", "send_timeout", float("nan")),
    ("http", "wsgi_workers", 2.5),
    ("http", "max_body_bytes", True),
    ("http", "body_timeout", float("inf")),
    ("identity", "ticket_ttl", 0),
    ("identity", "ticket_rate", (0, 10.0)),
    ("identity", "ticket_rate", 5),
    ("identity", "credential_refresh_interval", 0),
    ("identity", "credential_stale_after", 0.1),  # not longer than the refresh interval
    ("sockets", "origins", "https://app.example.com"),
    ("sockets", "origins", ["app.example.com"]),
    ("sockets", "redis_url", ""),
    ("sockets", "redis_channel", ""),
    ("plugins", "timeout", "5"),
    ("plugins", "hung_limit", 0),
    ("runs", "max_message_bytes", "256k"),
    ("runs", "working_dir", ""),
    ("lifecycle", "reply_timeout", float("inf")),
    ("lifecycle", "cancel_deadline", "30"),
    ("lifecycle", "max_run_duration", True),
    ("pumps", "scan_interval", 0),
    ("app_runs", "sweep_interval", 0),
    ("execution", "observe", "yes"),
    ("approvals", "sweep_interval", -1),
]
# Every keyword Gateway took before GatewaySettings: a value that works (not the default),
# where it lands, and how that place is written.
OLD_KEYWORDS: dict[str, tuple[object, str]] = {
    "ping_interval": (5.0, "streams=StreamSettings(ping_interval=...)"),
    "queue_size": (16, "streams=StreamSettings(queue_size=...)"),
    "max_page_bytes": (4096, "streams=StreamSettings(max_page_bytes=...)"),
    "send_timeout": (3.0, "http=HttpSettings(send_timeout=...)"),
    "max_body_bytes": (2048, "http=HttpSettings(max_body_bytes=...)"),
    "body_timeout": (7.0, "http=HttpSettings(body_timeout=...)"),
    "wsgi_workers": (3, "http=HttpSettings(wsgi_workers=...)"),
    "credential_refresh_interval": (1.0, "identity=IdentitySettings(credential_refresh_interval"),
    "credential_stale_after": (20.0, "identity=IdentitySettings(credential_stale_after=...)"),
    "ticket_ttl": (5.0, "identity=IdentitySettings(ticket_ttl=...)"),
    "ticket_rate": ((3, 1.0), "identity=IdentitySettings(ticket_rate=...)"),
    "plugin_timeout": (1.0, "plugins=PluginSettings(timeout=...)"),
    "plugin_hung_limit": (3, "plugins=PluginSettings(hung_limit=...)"),
    "socket_origins": (("https://app.example.com",), "sockets=SocketSettings(origins=...)"),
    "socketio_redis_url": ("redis://127.0.0.1:6379/0", "sockets=SocketSettings(redis_url=...)"),
    "socketio_redis_channel": ("ours", "sockets=SocketSettings(redis_channel=...)"),
    "max_message_bytes": (1024, "runs=RunSettings(max_message_bytes=...)"),
    "working_dir": ("/tmp", "runs=RunSettings(working_dir=...)"),
    "pump_scan_interval": (0.5, "pumps=PumpSettings(scan_interval=...)"),
    "owned_run_sweep_interval": (0.5, "app_runs=AppRunSettings(sweep_interval=...)"),
    "reply_timeout": (4.0, "lifecycle=LifecycleSettings(reply_timeout=...)"),
    "cancel_deadline": (4.0, "lifecycle=LifecycleSettings(cancel_deadline=...)"),
    "max_run_duration": (60.0, "lifecycle=LifecycleSettings(max_run_duration=...)"),
    "observe_execution": (False, "execution=ExecutionSettings(observe=...)"),
    "pump_settings": (PumpSettings(lease_ttl=2.0), "pumps=PumpSettings(...)"),
    "lifecycle_settings": (LifecycleSettings(max_follow_ups=0), "lifecycle=LifecycleSettings(...)"),
    "execution_settings": (ExecutionSettings(grace=1.0), "execution=ExecutionSettings(...)"),
    "approval_settings": (ApprovalSettings(sweep_interval=0.5), "approvals=ApprovalSettings(...)"),
    "legacy_tasks_path": ("/api/tasks", "legacy=LegacySurfaces(tasks=...)"),
    "legacy_usage_path": ("/api/usage", "legacy=LegacySurfaces(usage=...)"),
    "legacy_socket_token_path": ("/api/token", "legacy=LegacySurfaces(socket_token=...)"),
    "legacy_approvals_path": ("/api/pending", "legacy=LegacySurfaces(approvals=...)"),
    "legacy_socketio_path": ("/socket.io", "legacy=LegacySurfaces(socketio=...)"),
}


def options_of(part: str, **values: object) -> object:
    """The options object of `part` in GatewaySettings, with `values`."""
    return GatewaySettings.parts()[part](**values)


def landed(gateway: Gateway, keyword: str) -> object:
    """Where `keyword`'s value is now in a gateway: a field, a part's options, a legacy path."""
    if keyword in LEGACY:
        return getattr(gateway.legacy, LEGACY[keyword])
    if keyword in WHOLE:
        return getattr(gateway.settings, WHOLE[keyword])
    part, name = FIELDS[keyword]
    return getattr(getattr(gateway.settings, part), name)


@pytest.mark.parametrize(("part", "name", "value"), BAD_SETTINGS)
def test_a_setting_that_cannot_work_is_refused_naming_it(
    part: str, name: str, value: object
) -> None:
    with pytest.raises(SettingsError, match=name):
        options_of(part, **{name: value})


def test_each_part_of_the_settings_is_that_parts_options_object(sqlite_url: str) -> None:
    with pytest.raises(SettingsError, match=r"GatewaySettings.streams must be a StreamSettings"):
        GatewaySettings(streams=HttpSettings())  # type: ignore[arg-type]
    with EventLog(sqlite_url) as log, pytest.raises(SettingsError, match="GatewaySettings"):
        Gateway(log=log, settings={"streams": {}})  # type: ignore[arg-type]


def test_the_settings_reach_the_parts_they_tune(sqlite_url: str) -> None:
    settings = GatewaySettings(
        lifecycle=LifecycleSettings(max_follow_ups=0, reply_timeout=4.0),
        pumps=PumpSettings(scan_interval=0.5),
        approvals=ApprovalSettings(sweep_interval=0.5),
        execution=ExecutionSettings(observe=False),
    )
    with EventLog(sqlite_url) as log:
        gateway = Gateway(log=log, upstream=GooseUpstream(secret_key="s"), settings=settings)
        assert gateway.lifecycle is not None and gateway.pumps is not None
        assert gateway.lifecycle.settings == settings.lifecycle
        assert gateway.pumps.scan_interval == 0.5
        assert gateway.approvals is not None
        assert gateway.approvals.settings.sweep_interval == 0.5
        assert "ExecutionObserver" not in [m.cls.__name__ for m in gateway.app_middleware]


@pytest.mark.parametrize("keyword", OLD_KEYWORDS)
def test_an_old_keyword_works_warning_where_its_setting_is_now(
    sqlite_url: str, keyword: str
) -> None:
    value, place = OLD_KEYWORDS[keyword]
    with EventLog(sqlite_url) as log:
        with pytest.warns(DeprecationWarning, match=re.escape(place)) as warned:
            gateway = Gateway(log=log, **{keyword: value})  # type: ignore[arg-type]
        assert landed(gateway, keyword) == value
    said = [str(w.message).split(" is deprecated")[0] for w in warned]
    assert said == [f"Gateway({keyword}=...)"]
    assert warned[0].filename == __file__  # the caller's line, not the gateway's


@pytest.mark.parametrize("keyword", OLD_KEYWORDS)
def test_an_old_keyword_given_also_in_its_new_place_is_refused(
    sqlite_url: str, keyword: str
) -> None:
    value, _ = OLD_KEYWORDS[keyword]
    if keyword in LEGACY:
        given: dict[str, object] = {"legacy": LegacySurfaces(csrf_token_route="/api/csrf")}
    elif keyword in WHOLE:
        part = WHOLE[keyword]
        given = {"settings": GatewaySettings(**{part: value})}
    else:
        part, name = FIELDS[keyword]
        given = {"settings": GatewaySettings(**{part: options_of(part, **{name: value})})}
    twice = f"{keyword}.* two ways|two ways.*{keyword}"
    with (
        EventLog(sqlite_url) as log,
        pytest.warns(DeprecationWarning),
        pytest.raises(SettingsError, match=twice),
    ):
        Gateway(log=log, **given, **{keyword: value})  # type: ignore[arg-type]


def test_an_old_keyword_beside_another_part_of_the_settings_is_put_in_it(
    sqlite_url: str,
) -> None:
    settings = GatewaySettings(streams=StreamSettings(queue_size=16))
    with EventLog(sqlite_url) as log, pytest.warns(DeprecationWarning):
        gateway = Gateway(
            log=log,
            settings=settings,
            ping_interval=5.0,
            lifecycle_settings=LifecycleSettings(max_follow_ups=0),
            reply_timeout=4.0,
        )
    assert gateway.settings.streams == StreamSettings(queue_size=16, ping_interval=5.0)
    assert gateway.settings.lifecycle == LifecycleSettings(max_follow_ups=0, reply_timeout=4.0)


def test_an_old_keyword_with_a_value_that_cannot_work_is_refused_naming_it(
    sqlite_url: str,
) -> None:
    with (
        EventLog(sqlite_url) as log,
        pytest.warns(DeprecationWarning),
        pytest.raises(SettingsError, match=r"PluginSettings.timeout"),
    ):
        Gateway(log=log, plugin_timeout=0)


def test_an_unknown_keyword_is_a_type_error(sqlite_url: str) -> None:
    with EventLog(sqlite_url) as log, pytest.raises(TypeError, match="'ping_intervall'"):
        Gateway(log=log, ping_intervall=5.0)  # type: ignore[call-arg]


def test_the_approval_expiry_is_a_gateway_keyword_alone(sqlite_url: str) -> None:
    with pytest.raises(SettingsError, match=re.escape("Gateway(approval_expiry=...)")):
        GatewaySettings(approvals=ApprovalSettings(expiry=60.0))
    upstream = GooseUpstream(secret_key="s")
    with EventLog(sqlite_url) as log:
        with pytest.raises(SettingsError, match="approval_expiry"):
            Gateway(log=log, approval_expiry=0)
        gateway = Gateway(log=log, upstream=upstream, approval_expiry=60.0)
        assert gateway.approvals is not None and gateway.approvals.settings.expiry == 60.0
        # The old keyword's expiry is the expiry, once.
        old = ApprovalSettings(expiry=30.0, sweep_interval=0.5)
        with pytest.warns(DeprecationWarning, match="approval_expiry"):
            gateway = Gateway(log=log, upstream=upstream, approval_settings=old)
        assert gateway.approvals is not None
        assert gateway.approvals.settings == old
        assert gateway.settings.approvals == ApprovalSettings(sweep_interval=0.5)
        with pytest.warns(DeprecationWarning), pytest.raises(SettingsError, match="two ways"):
            Gateway(log=log, approval_settings=old, approval_expiry=60.0)


def test_no_setting_has_two_places() -> None:
    parameters = set(inspect.signature(Gateway).parameters)
    assert "prefix" in parameters and "approval_expiry" in parameters
    fields = {
        f"{part}.{field.name}"
        for part, kind in GatewaySettings.parts().items()
        for field in dataclasses.fields(kind)
    }
    assert not {name.split(".")[1] for name in fields} & parameters - {"plugins"}
    assert "prefix" not in {name.split(".")[1] for name in fields}
    # Each old keyword names one field (or one part, or one legacy path), none twice.
    places = [f"{part}.{name}" for part, name in FIELDS.values()]
    assert len(places) == len(set(places)) and set(places) <= fields
    assert set(OLD_KEYWORDS) == set(FIELDS) | set(WHOLE) | set(LEGACY)
    assert set(OLD_KEYWORDS) == set(DeprecatedKeywords.__annotations__)


def test_every_setting_is_in_the_settings_doc() -> None:
    doc = (Path(__file__).parents[2] / "docs" / "settings.md").read_text(encoding="utf-8")
    for part, kind in GatewaySettings.parts().items():
        assert f"`{kind.__name__}`" in doc, kind
        for field in dataclasses.fields(kind):
            assert f"`{part}.{field.name}`" in doc, f"{part}.{field.name}"


def test_paths_lose_their_trailing_slash(sqlite_url: str) -> None:
    with EventLog(sqlite_url) as log:
        assert Gateway(log=log, prefix="/gk/").prefix == "/gk"
        for prefix in ("gateway", "/"):
            with pytest.raises(SettingsError, match="prefix"):
                Gateway(log=log, prefix=prefix)
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
        with (
            pytest.warns(DeprecationWarning),
            pytest.raises(SettingsError, match="legacy_usage_path; give them in legacy= alone"),
        ):
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
