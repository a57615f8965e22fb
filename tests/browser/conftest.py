"""What the browser tests share: a demo server with an API token of user ``demo``, and a
headless Chromium (Debian's; the test fails when it is missing)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, sync_playwright

from gateway_kit import EventLog
from gateway_kit.identity.tokens import ApiTokens

from .demo_server import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, Server, free_port


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Server]:
    server = Server(f"sqlite:///{tmp_path}/gateway.db", free_port(), tmp_path / "server.log")
    with EventLog(server.db_url) as log:
        server.token = ApiTokens(log).create("demo")[1]
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def browser() -> Iterator[Browser]:
    assert os.path.exists(CHROMIUM), NO_CHROMIUM
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
