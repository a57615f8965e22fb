"""The guard in a Gateway of its own, read with httpx."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_kit import EventLog, Gateway, PluginError

from gateway_kit_example_guard import PrefixGuard

BASE = "http://test"
JSON = {"accept": "application/json"}
# A plugin object passed in is named after its class.
NAME = f"{PrefixGuard.__module__}.{PrefixGuard.__qualname__}"
BAD_SETTINGS = [{"deny_prefix": ""}, {"deny_prefix": 7}, {"deny": "secret-"}]


@pytest.fixture
def log(tmp_path: Path) -> Iterator[EventLog]:
    event_log = EventLog(f"sqlite:///{tmp_path}/gateway.db")
    event_log.append("secret-plans", "Message", {"text": "psst"})
    event_log.append("open", "Message", {"text": "hi"})
    yield event_log
    event_log.close()


def guarded(log: EventLog, guard: PrefixGuard, **settings: Any) -> Gateway:
    """A Gateway with `guard` passed in, and no other distribution's plugins."""
    return Gateway(
        allow_anonymous=True,
        log=log,
        plugins=[guard],
        load_entry_points=False,
        plugin_config={NAME: settings},
    )


def read(gateway: Gateway, stream: str) -> httpx.Response:
    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=gateway)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            return await client.get(f"/gateway/streams/{stream}/events", headers=JSON)

    return asyncio.run(get())


@pytest.mark.parametrize("configured", ["by its settings", "when it is made"])
def test_streams_with_the_prefix_are_refused(log: EventLog, configured: str) -> None:
    if configured == "when it is made":
        gateway = guarded(log, PrefixGuard("secret-"))
    else:
        gateway = guarded(log, PrefixGuard(), deny_prefix="secret-")
    refused = read(gateway, "secret-plans")
    assert refused.status_code == 403
    assert refused.json()["error"] == "forbidden"
    allowed = read(gateway, "open")
    assert allowed.status_code == 200
    assert [event["data"] for event in allowed.json()["events"]] == [{"text": "hi"}]


def test_without_a_prefix_nothing_is_refused(log: EventLog) -> None:
    assert read(guarded(log, PrefixGuard()), "secret-plans").status_code == 200


def test_each_gateway_has_a_guard_of_its_own(log: EventLog) -> None:
    secret = guarded(log, PrefixGuard("secret-"))
    open_ = guarded(log, PrefixGuard("open"))
    assert read(secret, "secret-plans").status_code == 403
    assert read(secret, "open").status_code == 200
    assert read(open_, "open").status_code == 403


@pytest.mark.parametrize("settings", BAD_SETTINGS)
def test_bad_settings_stop_the_gateway(log: EventLog, settings: Any) -> None:
    with pytest.raises(PluginError, match=f"plugin '{NAME}' refused"):
        guarded(log, PrefixGuard(), **settings)
