"""The legacy Flask session cookie as a principal: read with the app's key, never rewritten."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest
from gateway_kit_plugins.flask_session_identity import FlaskSessionIdentity

from gateway_kit import EventLog, Gateway, Principal, hookimpl
from gateway_kit.hooks import PluginContext
from gateway_kit.identity.flask_session import FlaskSessionReader
from gateway_kit.identity.logins import EndedLogins
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.types import Scope
from tests.support.flask_site import (
    OLD_SECRET,
    SECRET,
    assert_error,
    flask_app,
    log_in,
    signed_cookie,
    strict_gateway,
    with_clients,
)

JSON = {"accept": "application/json"}
PAGE = "/gateway/streams/alice-notes/events"


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    event_log = EventLog(sqlite_url)
    event_log.append("alice-notes", "Message", {"text": "mine"})
    StreamOwners(event_log).declare("alice-notes", "alice")
    try:
        yield event_log
    finally:
        event_log.close()


def test_a_logged_in_user_reads_their_stream_and_nobody_else_does(log: EventLog) -> None:
    gateway = strict_gateway(log)

    async def body(alice: httpx.AsyncClient, bob: httpx.AsyncClient, nobody: httpx.AsyncClient):
        await log_in(alice, "alice")
        await log_in(bob, "bob")
        page = await alice.get(PAGE, headers=JSON)
        assert page.status_code == 200 and page.json()["events"][0]["data"] == {"text": "mine"}
        assert "set-cookie" not in page.headers  # the gateway only reads the cookie
        assert_error(await bob.get(PAGE, headers=JSON), 403, "forbidden")
        assert_error(await nobody.get(PAGE, headers=JSON), 401, "unauthenticated")
        # A stream nobody owns is refused alike: the answer says nothing of whether it exists.
        assert_error(
            await alice.get("/gateway/streams/nowhere/events", headers=JSON), 403, "forbidden"
        )

    with_clients(gateway, body, count=3)


def test_a_cookie_signed_with_a_fallback_key_is_accepted(log: EventLog) -> None:
    rotated = Gateway(
        flask_app(log, SECRET_KEY="the-newest-key", SECRET_KEY_FALLBACKS=[OLD_SECRET, SECRET]),
        log=log,
    )
    cookie = signed_cookie({"username": "alice", "login_id": "l1"}, key=OLD_SECRET)

    async def body(client: httpx.AsyncClient):
        answer = await client.get(PAGE, headers={**JSON, "cookie": f"session={cookie}"})
        assert answer.status_code == 200, answer.text

    with_clients(rotated, body)


@pytest.mark.parametrize("kind", ["tampered", "unknown key", "expired", "garbage"])
def test_a_bad_cookie_is_no_principal(log: EventLog, kind: str) -> None:
    gateway = strict_gateway(log)
    good = signed_cookie({"username": "alice", "login_id": "l1"})
    cookie = {
        "tampered": good.replace(
            good.split(".")[0], signed_cookie({"username": "bob"}).split(".")[0]
        ),
        "unknown key": signed_cookie({"username": "alice"}, key="someone-elses-key"),
        "expired": signed_cookie({"username": "alice"}, at=time.time() - 32 * 24 * 3600),
        "garbage": "not.a.cookie",
    }[kind]

    async def body(client: httpx.AsyncClient):
        answer = await client.get(PAGE, headers={**JSON, "cookie": f"session={cookie}"})
        assert_error(answer, 401, "unauthenticated")
        fresh = await client.get(PAGE, headers={**JSON, "cookie": f"session={good}"})
        assert fresh.status_code == 200  # the same request with the real cookie passes

    with_clients(gateway, body)


def test_an_invalid_bearer_token_beside_a_valid_cookie_is_a_401(log: EventLog) -> None:
    gateway = strict_gateway(log)

    async def body(client: httpx.AsyncClient):
        await log_in(client, "alice")
        assert (await client.get(PAGE, headers=JSON)).status_code == 200
        for value in ("Bearer gk_000000000000_wrong", "Bearer nonsense", "bearer\tgk_0_x"):
            answer = await client.get(PAGE, headers={**JSON, "authorization": value})
            assert_error(answer, 401, "unauthenticated")

    with_clients(gateway, body)


def test_a_cookie_principals_unsafe_request_needs_the_csrf_token(log: EventLog) -> None:
    gateway = strict_gateway(log)  # no upstream: a run start that gets past identity is a 501

    async def body(client: httpx.AsyncClient):
        csrf = await log_in(client, "alice")
        runs = "/gateway/streams/alice-notes/runs"
        assert_error(await client.post(runs, json={"message": "hi"}), 403, "csrf_failed")
        wrong = {"x-csrf-token": csrf[:-2] + "xx"}
        assert_error(
            await client.post(runs, json={"message": "hi"}, headers=wrong), 403, "csrf_failed"
        )
        passed = await client.post(runs, json={"message": "hi"}, headers={"x-csrf-token": csrf})
        assert_error(passed, 501, "no_upstream")
        # The wrapped app keeps its own rules: the gateway asks no CSRF token of its routes.
        task = await client.post("/api/tasks", json={"conversation_id": "c", "message": "hi"})
        assert task.status_code == 200, task.text

    with_clients(gateway, body)


def test_the_wrapped_flask_app_finds_the_principal_in_its_environ(log: EventLog) -> None:
    app = flask_app(log)
    seen = []

    @app.get("/whoami")
    def whoami() -> dict[str, object]:
        from flask import request

        principal = request.environ.get("gateway_kit.principal")
        seen.append(principal)
        return {"user": principal.user_id if principal else None}

    gateway = Gateway(app, log=log)

    async def body(client: httpx.AsyncClient):
        assert (await client.get("/whoami")).json() == {"user": None}
        await log_in(client, "bob")
        assert (await client.get("/whoami")).json() == {"user": "bob"}

    with_clients(gateway, body)
    assert seen[1].method == "cookie" and seen[1].credential_id.startswith("login:")


def test_each_login_is_a_credential_of_its_own(log: EventLog) -> None:
    gateway = strict_gateway(log)
    credentials = []
    app = gateway.wrapped.app

    async def body(first: httpx.AsyncClient, second: httpx.AsyncClient):
        for client in (first, second):
            await log_in(client, "alice")
            cookie = client.cookies["session"]
            login = gateway.plugins.manager.get_plugin("flask_session_identity").reader.login(
                f"session={cookie}"
            )
            credentials.append(login.credential_id)

    with_clients(gateway, body, count=2)
    assert app is not None and len(set(credentials)) == 2


class OwnCookieResolver(FlaskSessionIdentity):
    """A deployment's resolver built on the built-in one, under a name of its own."""


class CookieResolverOfItsOwn:
    """A deployment's cookie resolver that holds the built-in one under names of its own: the
    gateway learns how it reads logins from its `cookie_logins` answer, not its attributes."""

    __name__ = "own_cookie"

    def __init__(self) -> None:
        self._inner = FlaskSessionIdentity()

    @hookimpl
    def configure_plugin(self, config: Mapping[str, Any], context: PluginContext) -> None:
        self._inner.configure_plugin(config, context)

    @hookimpl
    def cookie_logins(self) -> tuple[FlaskSessionReader, EndedLogins] | None:
        return self._inner.cookie_logins()

    @hookimpl
    def resolve_principal(self, scope: Scope) -> Principal | None:
        return self._inner.resolve_principal(scope)


@pytest.mark.parametrize("resolver", ["built-in", "built on it"])
def test_logging_out_ends_the_login_and_a_copy_of_its_cookie_is_refused(
    log: EventLog, resolver: str
) -> None:
    if resolver == "built-in":
        gateway = strict_gateway(log)
    else:
        gateway = strict_gateway(
            log, plugins=[OwnCookieResolver()], block_plugins=["flask_session_identity"]
        )
        assert gateway.plugins.manager.get_plugin("flask_session_identity") is None

    logging_out_ends_the_login(gateway)


def test_a_resolver_answering_cookie_logins_has_its_logouts_noticed(log: EventLog) -> None:
    gateway = strict_gateway(
        log, plugins=[CookieResolverOfItsOwn()], block_plugins=["flask_session_identity"]
    )
    logging_out_ends_the_login(gateway)


def logging_out_ends_the_login(gateway: Gateway) -> None:
    async def body(client: httpx.AsyncClient, other_login: httpx.AsyncClient):
        csrf = await log_in(client, "alice")
        await log_in(other_login, "alice")
        kept = client.cookies["session"]  # what an attacker copied before the logout
        assert (await client.get(PAGE, headers=JSON)).status_code == 200
        assert (await client.post("/logout", headers={"x-csrf-token": csrf})).status_code == 200
        copied = await client.get(PAGE, headers={**JSON, "cookie": f"session={kept}"})
        assert_error(copied, 401, "unauthenticated")
        # Only that login ended: alice's other login (another browser) goes on.
        assert (await other_login.get(PAGE, headers=JSON)).status_code == 200

    with_clients(gateway, body, count=2)
