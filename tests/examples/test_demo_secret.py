"""The demo's cookie key: never a constant anyone can read, kept by its database.

A cookie signed with a key from the source code logs anyone in as anyone. The demo makes a
random key per database (so restarts and every worker keep the same logins), unless
``$GATEWAY_KIT_DEMO_SECRET_KEY`` names one, and says which at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import httpx
import pytest

from gateway_kit.demo import create_app
from gateway_kit.demo.gateway import build_demo
from gateway_kit.demo.secret import FOR_PROCESS, FROM_DATABASE, FROM_VARIABLE, SECRET_KEY_VAR
from tests.support.flask_site import signed_cookie

# What the demo signed every cookie with before: it is in every copy of the source.
PUBLISHED_KEY = "gateway-kit-demo-only-this-key-is-not-secret"


def login_of(db_url: str, cookie: str) -> object:
    """Whom the demo over `db_url` takes a request carrying `cookie` for (None: nobody)."""

    async def main() -> object:
        demo = build_demo(db_url)
        try:
            transport = httpx.ASGITransport(app=demo)
            async with httpx.AsyncClient(transport=transport, base_url="http://demo.test") as c:
                answer = await c.get("/api/csrf-token", headers={"cookie": f"session={cookie}"})
                assert answer.status_code == 200, answer.text
                return answer.json()["username"]
        finally:
            await demo.goose.aclose()
            demo.log.close()

    return asyncio.run(main())


def key_of(db_url: str) -> str:
    """The key the demo over `db_url` signs its cookies with."""

    async def main() -> str:
        demo = build_demo(db_url)
        try:
            return str(demo.gateway.plugins.context.app.config["SECRET_KEY"])
        finally:
            await demo.goose.aclose()
            demo.log.close()

    return asyncio.run(main())


def test_a_cookie_signed_with_the_published_key_logs_nobody_in(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(SECRET_KEY_VAR, raising=False)
    forged = signed_cookie({"username": "demo", "csrf_token": "mine"}, key=PUBLISHED_KEY)
    assert login_of(sqlite_url, forged) is None


def test_the_key_is_random_per_database_and_kept_across_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(SECRET_KEY_VAR, raising=False)
    caplog.set_level(logging.INFO, logger="gateway_kit.demo")
    first, other = f"sqlite:///{tmp_path}/one.db", f"sqlite:///{tmp_path}/two.db"
    key = key_of(first)
    assert key_of(first) == key  # a restart: the same key, the same logins
    assert key_of(other) != key
    assert len(key) >= 40 and key != PUBLISHED_KEY
    assert FROM_DATABASE in caplog.messages  # said at start-up
    # A login signed with the database's key is still one after a restart.
    cookie = signed_cookie({"username": "demo", "csrf_token": "t"}, key=key)
    assert login_of(first, cookie) == "demo"


def test_a_configured_key_is_used_and_said_so(
    sqlite_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(SECRET_KEY_VAR, "the-operators-own-key")
    caplog.set_level(logging.INFO, logger="gateway_kit.demo")
    assert key_of(sqlite_url) == "the-operators-own-key"
    assert FROM_VARIABLE in caplog.messages


def test_an_app_with_no_database_and_no_key_signs_with_a_key_of_its_own(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delenv(SECRET_KEY_VAR, raising=False)
    keys = {create_app().config["SECRET_KEY"] for _ in range(2)}
    assert len(keys) == 2 and PUBLISHED_KEY not in keys
    assert FOR_PROCESS in caplog.messages
