"""Resolving who a request is from: off the event loop, per login, and only for the schemes the
gateway knows."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import sqlalchemy as sa
from flask import Flask, jsonify, session

from gateway_kit import EventLog, Gateway, GatewaySettings, PluginSettings, Principal, hookimpl
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.flask_site import BASE, SECRET, assert_error, strict_gateway, with_clients
from tests.support.waiting import wait_until

JSON = {"accept": "application/json"}
PAGE = "/gateway/streams/alice-notes/events"
CAROLS = "/gateway/streams/carol-work/events"
WAIT = 3.0  # seconds a request may take before it counts as held up
HELD = 4.0  # seconds the slow resolver waits at most for the test to let it go


class SlowResolver:
    """Answers for requests marked ``x-slow`` once the test lets it go (a remote directory
    that takes seconds)."""

    __name__ = "slow-directory"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.released_in_time: bool | None = None

    @hookimpl(tryfirst=True)
    def resolve_principal(self, scope: Any) -> Principal | None:
        if (b"x-slow", b"1") not in scope.get("headers", ()):
            return None
        self.released_in_time = self.release.wait(HELD)
        return Principal(user_id="alice", method="directory")


def test_a_slow_resolver_delays_only_its_own_request(log: EventLog) -> None:
    log.append("alice-notes", "Message", {"text": "mine"})
    StreamOwners(log).declare("alice-notes", "alice")
    _, token = ApiTokens(log).create("alice")
    slow = SlowResolver()
    gateway = strict_gateway(
        log, plugins=[slow], settings=GatewaySettings(plugins=PluginSettings(timeout=HELD * 2))
    )

    async def body(client: httpx.AsyncClient) -> None:
        waiting = asyncio.ensure_future(client.get(PAGE, headers={**JSON, "x-slow": "1"}))
        # Served while the slow resolver still holds the first request.
        other = await client.get(PAGE, headers={**JSON, "authorization": f"Bearer {token}"})
        assert other.status_code == 200 and not waiting.done()
        slow.release.set()
        assert (await waiting).status_code == 200

    with_clients(gateway, body)
    assert slow.released_in_time is True


def nonce_less_app() -> Flask:
    """An app whose sessions hold the user alone, with no per-login id."""
    app = Flask("plain-sessions")
    app.config["SECRET_KEY"] = SECRET

    @app.post("/login")
    def login() -> Any:
        session["username"] = "alice"
        return jsonify(ok=True)

    @app.post("/logout")
    def logout() -> Any:
        session.clear()
        return jsonify(ok=True)

    return app


def test_a_user_logs_in_again_after_a_logout_without_a_login_id(sqlite_url: str) -> None:
    log = EventLog(sqlite_url)
    log.append("alice-notes", "Message", {"text": "mine"})
    StreamOwners(log).declare("alice-notes", "alice")
    gateway = Gateway(nonce_less_app(), log=log)

    async def main() -> None:
        transport = httpx.ASGITransport(app=gateway, client=("127.0.0.1", 50000))
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as browser:
            await browser.post("/login")
            old = browser.cookies["session"]
            assert (await browser.get(PAGE, headers=JSON)).status_code == 200
            assert (await browser.post("/logout")).status_code == 200
            logged_out = time.time()
            copy = {**JSON, "cookie": f"session={old}"}
            assert_error(await browser.get(PAGE, headers=copy), 401, "unauthenticated")
            # Flask stamps a cookie with whole seconds: a login in the same second as the
            # logout cannot be told from a copy of the old cookie.
            await asyncio.to_thread(wait_until, lambda: time.time() >= int(logged_out) + 1)
            await browser.post("/login")
            assert browser.cookies["session"] != old
            again = await browser.get(PAGE, headers=JSON)
            assert again.status_code == 200, again.text
            assert_error(await browser.get(PAGE, headers=copy), 401, "unauthenticated")

    try:
        asyncio.run(main())
    finally:
        log.close()


def test_an_authorization_scheme_the_gateway_does_not_know_reaches_the_app(
    log: EventLog,
) -> None:
    gateway = strict_gateway(log)
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

    async def body(client: httpx.AsyncClient) -> None:
        for value in ("Basic YWxpY2U6YWxpY2UtcHc=", f"JWT {jwt}", "Digest username=alice"):
            headers = {"authorization": value}
            app_route = await client.get("/api/csrf-token", headers=headers)
            assert app_route.status_code == 200, (value, app_route.text)
            # To the gateway it is no credential: its routes ask for one.
            assert_error(
                await client.get(PAGE, headers={**JSON, **headers}), 401, "unauthenticated"
            )
        for value in ("Bearer gk_000000000000_wrong", f"Bearer {jwt}", "bearer"):
            # A Bearer header the gateway cannot accept: refused on its own routes, the app's
            # own business on the app's.
            refused = await client.get(PAGE, headers={**JSON, "authorization": value})
            assert_error(refused, 401, "unauthenticated")
            app_route = await client.get("/api/csrf-token", headers={"authorization": value})
            assert app_route.status_code == 200, (value, app_route.text)

    with_clients(gateway, body)


@contextlib.contextmanager
def tokens_table_locked(log_url: str) -> Iterator[None]:
    """Another connection holds the tokens table: PostgreSQL's strongest lock (no read gets
    through), or SQLite's write lock, until the block ends."""
    if log_url.startswith("sqlite"):
        holder = sqlite3.connect(log_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        holder.execute("UPDATE gateway_kit_api_tokens SET scopes = scopes")
    else:
        url = sa.make_url(log_url)
        options = url.query.get("options")
        holder = psycopg.connect(  # type: ignore[assignment]
            host=url.host, port=url.port, user=url.username, dbname=url.database,
            options=options if isinstance(options, str) else "",
        )  # fmt: skip
        holder.execute("LOCK TABLE gateway_kit_api_tokens IN ACCESS EXCLUSIVE MODE")
    try:
        yield
    finally:
        holder.rollback()
        holder.close()


def test_a_valid_token_is_served_while_the_tokens_table_is_locked(log_url: str) -> None:
    log = EventLog(log_url)
    log.append("carol-work", "Message", {"text": "for carol"})
    StreamOwners(log).declare("carol-work", "carol")
    _, token = ApiTokens(log).create("carol")
    gateway = strict_gateway(log)
    headers = {**JSON, "authorization": f"Bearer {token}"}

    async def body(client: httpx.AsyncClient) -> list[int]:
        assert (await client.get(CAROLS, headers=headers)).status_code == 200
        with tokens_table_locked(log_url):
            answers = [
                await asyncio.wait_for(client.get(CAROLS, headers=headers), WAIT) for _ in range(5)
            ]
        return [a.status_code for a in answers]

    try:
        assert with_clients(gateway, body) == [200] * 5
    finally:
        log.close()
