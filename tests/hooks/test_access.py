"""The access hooks over HTTP: who a request is from, and who may read which stream.

`resolve_principal` runs once per request before every route and the wrapped app;
`authorize_subscription` once per read (SSE, JSON page, run stream, legacy poll), never per
event. Both fail closed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from gateway_kit import (
    EventLog,
    Gateway,
    GatewaySettings,
    LegacySurfaces,
    PluginSettings,
    Principal,
)
from gateway_kit.hooks import policy
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.principal import COOKIE_METHOD, principal_of
from gateway_kit.types import Receive, Scope, Send
from tests.support.asgi_driver import Request
from tests.support.plugins import plugin, raising

JSON = {"accept": "application/json"}


@pytest.fixture
def log(sqlite_url: str) -> Iterator[EventLog]:
    with EventLog(sqlite_url) as event_log:
        event_log.append("open", "Message", {"text": "hi"}, run_id="run-open")
        event_log.append("secret", "Message", {"text": "psst"}, run_id="run-secret")
        yield event_log


async def echo_principal(scope: Scope, receive: Receive, send: Send) -> None:
    """A wrapped ASGI app that answers with the principal the stack gave it."""
    principal = principal_of(scope)
    body = json.dumps({"user": principal.user_id if principal else None}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def by_header(scope: Scope) -> Principal | None:
    for key, value in scope["headers"]:
        if key == b"x-user":
            return Principal(value.decode(), "header", credential_id="test")
    return None


def deny_secret(principal: Principal, stream: str) -> bool | None:
    return False if stream == "secret" else None


async def get(app: Any, path: str, **kwargs: Any) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        return await client.get(path, **kwargs)


def assert_json_error(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    assert response.json()["error"] == code and response.json()["message"]


# --- resolve_principal -----------------------------------------------------------------------


def test_resolve_principal_answer_reaches_the_routes_and_the_wrapped_app(log: EventLog) -> None:
    asked: list[tuple[str, str]] = []

    def record(principal: Principal, stream: str) -> None:
        asked.append((principal.user_id, stream))

    gateway = Gateway(
        echo_principal,
        allow_anonymous=True,
        log=log,
        plugins=[
            plugin("sso", resolve_principal=by_header),
            plugin("audit", authorize_subscription=record),
        ],
    )

    StreamOwners(log).declare("open", "bob")  # bob reads his own stream

    async def main() -> None:
        answer = await get(gateway, "/legacy/page", headers={"x-user": "alice"})
        assert answer.json() == {"user": "alice"}
        anonymous = await get(gateway, "/legacy/page")
        assert anonymous.json() == {"user": "anonymous"}  # no resolver answered
        page = await get(gateway, "/gateway/streams/open/events", headers={**JSON, "x-user": "bob"})
        assert page.status_code == 200

    asyncio.run(main())
    assert asked == [("bob", "open")]


class SteppedClock:
    """A clock that moves only when told: a plugin takes time without the test waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


clock = SteppedClock()


def slow(scope: Scope) -> Principal:
    clock.now += 0.3  # by the gateway's clock, the answer comes 0.3 s after the question
    return Principal("late", "header")


def nonsense(scope: Scope) -> str:
    return "alice"


def test_a_cookie_read_by_any_resolver_never_stands_in_for_a_bad_authorization(
    log: EventLog,
) -> None:
    def own_cookie(scope: Scope) -> Principal:
        return Principal("alice", COOKIE_METHOD)  # a deployment's own session resolver

    gateway = Gateway(
        echo_principal, log=log, plugins=[plugin("own-session", resolve_principal=own_cookie)]
    )

    async def main() -> None:
        assert (await get(gateway, "/legacy/page")).json() == {"user": "alice"}
        bad = {"authorization": "Bearer gk_not_a_token"}
        page = "/gateway/streams/open/events"
        assert_json_error(await get(gateway, page, headers={**JSON, **bad}), 401, "unauthenticated")
        # On the app's own path the header is the app's business: it reaches the app untouched.
        assert (await get(gateway, "/legacy/page", headers=bad)).json() == {"user": "alice"}

    asyncio.run(main())


def impostor(scope: Scope) -> Principal:
    return Principal("alice", "anonymous")  # the method only allow_anonymous may give


@pytest.mark.parametrize(
    ("name", "resolver"),
    [("broken", raising), ("nonsense", nonsense), ("slow", slow), ("impostor", impostor)],
)
def test_resolve_principal_failures_refuse_the_request(
    log: EventLog,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    resolver: Any,
) -> None:
    monkeypatch.setattr(policy, "CLOCK", clock)
    gateway = Gateway(
        echo_principal,
        allow_anonymous=True,
        log=log,
        plugins=[plugin(f"{name}-sso", resolve_principal=resolver)],
        settings=GatewaySettings(plugins=PluginSettings(timeout=0.1)),
    )

    async def main() -> None:
        assert_json_error(
            await get(gateway, "/gateway/streams/open/events", headers=JSON), 401, "unauthenticated"
        )
        # The app's own page is the app's to answer, with nobody vouched for (not anonymous).
        assert (await get(gateway, "/legacy/page")).json() == {"user": None}

    asyncio.run(main())
    assert f"{name}-sso" in caplog.text and "resolve_principal" in caplog.text


def test_resolve_principal_refusal_refuses_a_websocket_handshake(log: EventLog) -> None:
    reached: list[Scope] = []

    async def websocket_app(scope: Scope, receive: Receive, send: Send) -> None:
        reached.append(scope)

    gateway = Gateway(
        websocket_app,
        allow_anonymous=True,
        log=log,
        wsgi=False,
        plugins=[plugin("broken-sso", resolve_principal=raising)],
    )

    async def main() -> list[dict[str, Any]]:
        sent: list[dict[str, Any]] = []

        async def send(message: Any) -> None:
            sent.append(message)

        async def receive() -> dict[str, Any]:
            return {"type": "websocket.connect"}

        scope = {
            "type": "websocket",
            "path": "/gateway/socket.io/",
            "headers": [],
            "query_string": b"",
        }
        await gateway(scope, receive, send)
        return sent

    [close] = asyncio.run(main())
    assert close["type"] == "websocket.close" and not reached


# --- authorize_subscription ------------------------------------------------------------------


def test_authorize_subscription_is_asked_before_every_kind_of_read(log: EventLog) -> None:
    asked: list[str] = []

    def deny_and_record(principal: Principal, stream: str) -> bool | None:
        asked.append(stream)
        return deny_secret(principal, stream)

    gateway = Gateway(
        log=log,
        plugins=[plugin("acl", authorize_subscription=deny_and_record)],
        allow_anonymous=True,
        legacy=LegacySurfaces(tasks="/api/tasks"),
    )

    async def main() -> None:
        for stream, run_id, status in (("secret", "run-secret", 403), ("open", "run-open", 200)):
            page = await get(gateway, f"/gateway/streams/{stream}/events", headers=JSON)
            run_page = await get(gateway, f"/gateway/runs/{run_id}/events", headers=JSON)
            legacy = await get(gateway, f"/api/tasks/{run_id}")
            sse = Request(gateway, f"/gateway/streams/{stream}/events").start()
            await sse.wait_for(lambda r: r.status is not None)
            sse.disconnect()
            await sse.finished()
            assert page.status_code == status, page.text
            # A refused run is answered as one that does not exist: a 404.
            assert run_page.status_code == (404 if status == 403 else 200), run_page.text
            assert legacy.status_code == (404 if status == 403 else 200), legacy.text
            assert sse.status == status
            if status == 403:
                assert_json_error(page, 403, "forbidden")
                assert_json_error(run_page, 404, "run_not_found")
                # The legacy poll answers as the legacy app did for another user's task.
                assert_json_error(legacy, 404, "not_found")
                assert json.loads(bytes(sse.body))["error"] == "forbidden"

    asyncio.run(main())
    # The run stream and the legacy poll ask about the stream their run belongs to.
    assert asked == ["secret"] * 4 + ["open"] * 4


def test_authorize_subscription_a_deployments_plugin_is_asked_before_the_default(
    log: EventLog,
) -> None:
    gateway = Gateway(
        log=log, plugins=[plugin("acl", authorize_subscription=deny_secret)], allow_anonymous=True
    )
    names = [info.name for info in gateway.plugins.describe()]
    assert names.index("default_authorization") < names.index("acl")  # registered first

    async def main() -> None:
        assert_json_error(
            await get(gateway, "/gateway/streams/secret/events", headers=JSON), 403, "forbidden"
        )
        # acl defers (None) on other streams, and the built-in default allows them.
        assert (await get(gateway, "/gateway/streams/open/events", headers=JSON)).status_code == 200

    asyncio.run(main())


def test_authorize_subscription_with_the_default_blocked_nobody_may_read(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = Gateway(log=log, block_plugins=["default_authorization"], allow_anonymous=True)
    assert "default_authorization" not in {info.name for info in gateway.plugins.describe()}
    with caplog.at_level(logging.WARNING):
        response = asyncio.run(get(gateway, "/gateway/streams/open/events", headers=JSON))
    assert_json_error(response, 403, "forbidden")
    assert "no plugin decided" in caplog.text


def yes(principal: Principal, stream: str) -> str:
    return "yes"


@pytest.mark.parametrize(("name", "answer"), [("broken", raising), ("nonsense", yes)])
def test_authorize_subscription_failures_refuse_the_read(
    log: EventLog, caplog: pytest.LogCaptureFixture, name: str, answer: Any
) -> None:
    gateway = Gateway(
        log=log,
        plugins=[plugin(f"{name}-acl", authorize_subscription=answer)],
        allow_anonymous=True,
    )
    response = asyncio.run(get(gateway, "/gateway/streams/open/events", headers=JSON))
    assert_json_error(response, 403, "forbidden")
    assert f"{name}-acl" in caplog.text and "authorize_subscription" in caplog.text


def test_authorize_subscription_too_slow_refuses_the_read_and_names_the_plugin(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    def stuck(principal: Principal, stream: str) -> bool:
        release.wait(10)  # a plugin blocked on its own I/O
        return True

    gateway = Gateway(
        allow_anonymous=True,
        log=log,
        plugins=[plugin("stuck-acl", authorize_subscription=stuck)],
        settings=GatewaySettings(plugins=PluginSettings(timeout=0.2)),
    )
    try:
        response = asyncio.run(get(gateway, "/gateway/streams/open/events", headers=JSON))
    finally:
        release.set()
    assert_json_error(response, 403, "forbidden")
    assert "'stuck-acl' did not answer authorize_subscription" in caplog.text


def test_no_hook_is_called_per_delivered_event(log: EventLog) -> None:
    """Ten plugins implementing the access hooks, a replay of 300 events: one call each."""
    log.append_many([{"stream": "open", "type": "Message", "data": {"n": i}} for i in range(300)])
    noop = [
        plugin(
            f"noop-{i}", resolve_principal=lambda scope: None, authorize_subscription=deny_secret
        )
        for i in range(10)
    ]
    gateway = Gateway(log=log, plugins=noop, allow_anonymous=True)
    calls: list[str] = []
    gateway.plugins.manager.add_hookcall_monitoring(
        lambda hook, impls, kwargs: calls.append(hook), lambda outcome, hook, impls, kwargs: None
    )

    async def main() -> None:
        request = Request(gateway, "/gateway/streams/open/events").start()
        await request.wait_events(301)
        request.disconnect()
        await request.finished()

    asyncio.run(main())
    assert sorted(calls) == ["authorize_subscription", "resolve_principal"]
