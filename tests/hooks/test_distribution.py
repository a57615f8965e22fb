"""The example guard of tests/plugin_dist as an installed distribution: found through its entry
point, listed by ``gateway-kit plugins``, configured by ``plugin_config``, and left out when
entry points are off or it is blocked.

scripts/test installs it into the test virtualenv, so every Gateway of the suite loads it; it
refuses nothing until configured.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway_kit import EventLog, Gateway, PluginError
from gateway_kit.hooks import ENTRY_POINT, PluginInfo, PluginSource

NAME = "example_guard"
DISTRIBUTION = "gateway-kit-example-guard"
VERSION = "0.1.0"
MODULE = "gateway_kit_example_guard"
HOOKS = ("authorize_subscription", "configure_plugin")
SOURCE = f"entry point ({DISTRIBUTION} {VERSION})"
BUILT_IN = "default_authorization"
DENY_SECRET = {NAME: {"deny_prefix": "secret-"}}
JSON = {"accept": "application/json"}
REFUSED = "you may not read stream 'secret-plans'"
SOURCE_FILE = Path(__file__).resolve().parents[1] / "plugin_dist" / f"{MODULE}.py"
GATEWAY_KIT = Path(sys.executable).parent / "gateway-kit"
COMMAND_TIMEOUT = 60
READ_TIMEOUT = 10  # a read that streams (200 on SSE) never ends under ASGITransport


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        event_log.append("secret-plans", "Message", {"text": "psst"}, run_id="run-secret")
        event_log.append("open", "Message", {"text": "hi"}, run_id="run-open")
        yield event_log


def names(gateway: Gateway) -> list[str]:
    return [info.name for info in gateway.plugins.describe()]


def get(gateway: Gateway, path: str, headers: dict[str, str] = JSON) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway)
        async with (
            asyncio.timeout(READ_TIMEOUT),
            httpx.AsyncClient(transport=transport, base_url="http://test") as client,
        ):
            return await client.get(path, headers=headers)

    return asyncio.run(main())


def gateway_kit_plugins(*args: str) -> str:
    done = subprocess.run(
        [str(GATEWAY_KIT), "plugins", *args],
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


# --- found and listed ------------------------------------------------------------------------


def test_the_installed_guard_is_the_one_in_tests_plugin_dist() -> None:
    """A stale install (the source changed, scripts/test not re-run) fails here first."""
    installed = metadata.distribution(DISTRIBUTION)
    assert installed.version == VERSION
    files = [f for f in installed.files or () if f.name == f"{MODULE}.py"]
    assert len(files) == 1
    assert Path(str(files[0].locate())).read_text() == SOURCE_FILE.read_text()


def test_the_guard_is_found_through_its_entry_point(log: EventLog) -> None:
    infos = Gateway(log=log, allow_anonymous=True).plugins.describe()
    guard = PluginInfo(NAME, PluginSource(ENTRY_POINT, DISTRIBUTION, VERSION), HOOKS)
    assert guard in infos
    # Registered after the built-ins, so asked before them.
    assert [info.name for info in infos].index(BUILT_IN) < infos.index(guard)


def test_gateway_kit_plugins_lists_the_guard_with_its_source_and_hooks() -> None:
    rows = [re.split(r"\s{2,}", line) for line in gateway_kit_plugins().splitlines()]
    assert rows[0] == ["NAME", "FROM", "HOOKS"]
    assert [NAME, SOURCE, ", ".join(HOOKS)] in rows[1:]


def test_gateway_kit_plugins_json_lists_the_guard() -> None:
    listed = [json.loads(line) for line in gateway_kit_plugins("--json").splitlines()]
    assert {
        "name": NAME,
        "from": ENTRY_POINT,
        "distribution": DISTRIBUTION,
        "version": VERSION,
        "hooks": list(HOOKS),
    } in listed


@pytest.mark.parametrize("args", [["--no-entry-points"], ["--block", NAME]])
def test_gateway_kit_plugins_leaves_the_guard_out_when_asked(args: list[str]) -> None:
    output = gateway_kit_plugins("--json", *args)
    listed = [json.loads(line)["name"] for line in output.splitlines()]
    assert BUILT_IN in listed
    assert NAME not in listed


# --- its hooks are called ---------------------------------------------------------------------


def test_without_settings_the_guard_refuses_nothing(log: EventLog) -> None:
    gateway = Gateway(log=log, allow_anonymous=True)
    assert NAME in names(gateway)
    response = get(gateway, "/gateway/streams/secret-plans/events")
    assert response.status_code == 200, response.text
    assert [event["data"] for event in response.json()["events"]] == [{"text": "psst"}]


def test_configured_the_guard_refuses_every_read_of_streams_with_its_prefix(
    log: EventLog,
) -> None:
    gateway = Gateway(log=log, plugin_config=DENY_SECRET, allow_anonymous=True)
    page = get(gateway, "/gateway/streams/secret-plans/events")
    assert page.status_code == 403
    assert page.headers["content-type"] == "application/json"
    assert page.json() == {"error": "forbidden", "message": REFUSED}
    # Refused before anything is streamed, so the SSE and run streams end at once.
    assert get(gateway, "/gateway/streams/secret-plans/events", headers={}).status_code == 403
    # A run of a refused stream is answered as a run that does not exist.
    assert get(gateway, "/gateway/runs/run-secret/events").status_code == 404
    allowed = get(gateway, "/gateway/streams/open/events")
    assert allowed.status_code == 200, allowed.text
    assert [event["data"] for event in allowed.json()["events"]] == [{"text": "hi"}]
    assert get(gateway, "/gateway/runs/run-open/events").status_code == 200


def test_a_gateway_made_without_settings_after_a_configured_one_is_not_guarded(
    log: EventLog,
) -> None:
    Gateway(log=log, plugin_config=DENY_SECRET, allow_anonymous=True)
    later = Gateway(log=log, allow_anonymous=True)
    assert get(later, "/gateway/streams/secret-plans/events").status_code == 200


def test_every_gateway_makes_a_guard_of_its_own_from_the_entry_points_class(
    log: EventLog,
) -> None:
    first = Gateway(log=log, plugin_config=DENY_SECRET, allow_anonymous=True)
    second = Gateway(log=log, plugin_config={NAME: {"deny_prefix": "open"}}, allow_anonymous=True)
    assert first.plugins.manager.get_plugin(NAME) is not second.plugins.manager.get_plugin(NAME)
    assert get(first, "/gateway/streams/secret-plans/events").status_code == 403
    assert get(first, "/gateway/streams/open/events").status_code == 200
    assert get(second, "/gateway/streams/open/events").status_code == 403


@pytest.mark.parametrize(
    ("settings", "complaint"),
    [
        ({"deny_prefix": ""}, "deny_prefix must be a non-empty string, got ''"),
        ({"deny_prefix": 42}, "deny_prefix must be a non-empty string, got 42"),
        ({"deny_prefix": None}, "deny_prefix must be a non-empty string, got None"),
        ({"deny_prefx": "x"}, "unknown settings 'deny_prefx'; the only setting is 'deny_prefix'"),
    ],
)
def test_settings_that_cannot_work_stop_the_gateway_naming_the_plugin(
    log: EventLog, settings: dict[str, Any], complaint: str
) -> None:
    with pytest.raises(PluginError) as raised:
        Gateway(log=log, plugin_config={NAME: settings}, allow_anonymous=True)
    assert str(raised.value) == f"plugin {NAME!r} refused its settings: {complaint}"


# --- left out ---------------------------------------------------------------------------------


def test_without_entry_points_the_guard_is_not_loaded(log: EventLog) -> None:
    gateway = Gateway(log=log, load_entry_points=False, allow_anonymous=True)
    assert NAME not in names(gateway)
    assert BUILT_IN in names(gateway)
    with pytest.raises(PluginError, match=f"plugin_config names {NAME!r}, which is no loaded"):
        Gateway(log=log, load_entry_points=False, plugin_config=DENY_SECRET, allow_anonymous=True)


def test_a_blocked_guard_is_not_loaded_and_its_settings_are_not_used(log: EventLog) -> None:
    gateway = Gateway(
        log=log, block_plugins=[NAME], plugin_config=DENY_SECRET, allow_anonymous=True
    )
    assert NAME not in names(gateway)
    assert BUILT_IN in names(gateway)
    assert get(gateway, "/gateway/streams/secret-plans/events").status_code == 200
