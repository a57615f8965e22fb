"""`Gateway` as an ASGI app: what it mounts, what it routes, and its lifespan."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from flask import Flask
from starlette.applications import Starlette
from starlette.middleware import Middleware as StarletteMiddleware
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse
from starlette.routing import Route
from websockets.asyncio.client import connect

from gateway_kit import (
    EventLog,
    Gateway,
    GatewaySettings,
    HttpSettings,
    LegacySurfaces,
    Middleware,
    WrappedApp,
)
from gateway_kit.gateway import is_wsgi
from gateway_kit.principal import principal_of
from gateway_kit.types import Message
from tests.support.serving import serve_in_thread


def flask_app() -> Flask:
    app = Flask("legacy")
    app.add_url_rule("/hello", "hello", lambda: {"from": "flask"})
    return app


def wsgi_function(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("content-type", "text/plain")])
    return [b"plain wsgi"]


def get(app: Any, path: str, method: str = "GET", **kwargs: Any) -> httpx.Response:
    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(main())


def test_a_flask_app_is_mounted_through_a2wsgi(log: EventLog) -> None:
    gateway = Gateway(
        flask_app(),
        log=log,
        settings=GatewaySettings(http=HttpSettings(wsgi_workers=2)),
        allow_anonymous=True,
    )
    assert gateway.wsgi
    assert get(gateway, "/hello").json() == {"from": "flask"}


def test_a_plain_wsgi_callable_is_recognised_or_named(log: EventLog) -> None:
    assert is_wsgi(wsgi_function)
    assert get(Gateway(wsgi_function, log=log, allow_anonymous=True), "/any").text == "plain wsgi"
    assert (
        get(Gateway(wsgi_function, log=log, wsgi=True, allow_anonymous=True), "/any").text
        == "plain wsgi"
    )


def test_an_app_of_unknown_kind_must_be_named(log: EventLog) -> None:
    with pytest.raises(TypeError, match="wsgi=True or wsgi=False"):
        Gateway(lambda: None, log=log, allow_anonymous=True)


def test_an_asgi_app_is_mounted_as_is_with_its_lifespan(log: EventLog) -> None:
    started: list[str] = []

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        started.append("up")
        yield
        started.append("down")

    async def hello(request: StarletteRequest) -> JSONResponse:
        return JSONResponse({"from": "starlette"})

    inner = Starlette(routes=[Route("/hello", hello)], lifespan=lifespan)
    gateway = Gateway(inner, log=log, allow_anonymous=True)
    assert not gateway.wsgi
    assert get(gateway, "/hello").json() == {"from": "starlette"}
    assert run_lifespan(gateway) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert started == ["up", "down"]


def test_the_lifespan_is_answered_for_a_wsgi_app(log: EventLog) -> None:
    gateway = Gateway(flask_app(), log=log, allow_anonymous=True)
    assert run_lifespan(gateway) == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


def run_lifespan(app: Any) -> list[str]:
    async def main() -> list[str]:
        inbox: asyncio.Queue[Message] = asyncio.Queue()
        for kind in ("lifespan.startup", "lifespan.shutdown"):
            inbox.put_nowait({"type": kind})
        sent: list[str] = []

        async def send(message: Message) -> None:
            sent.append(message["type"])

        await asyncio.wait_for(
            app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send), 10
        )
        return sent

    return asyncio.run(main())


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/gateway/nothing", 404, "not_found"),
        ("GET", "/gateway", 404, "not_found"),
        ("GET", "/gateway/streams/conv", 404, "not_found"),
        ("GET", "/gateway/streams//events", 404, "not_found"),
        ("POST", "/gateway/streams/conv/events", 405, "method_not_allowed"),
        ("GET", "/not-under-the-prefix", 404, "not_found"),  # no wrapped app
    ],
)
def test_errors_are_json(log: EventLog, method: str, path: str, status: int, code: str) -> None:
    response = get(Gateway(log=log, allow_anonymous=True), path, method=method)
    assert response.status_code == status
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["error"] == code and body["message"]
    if status == 405:
        assert response.headers["allow"] == "GET"


def test_the_prefix_is_the_gateways_and_the_rest_is_the_apps(log: EventLog) -> None:
    log.append("a/b", "Message", {})
    gateway = Gateway(flask_app(), log=log, prefix="/gk/", allow_anonymous=True)
    assert gateway.prefix == "/gk"
    page = get(gateway, "/gk/streams/a%2Fb/events", headers={"accept": "application/json"})
    assert [e["stream"] for e in page.json()["events"]] == ["a/b"]
    assert get(gateway, "/gateway/streams/a/events").status_code == 404  # Flask's own 404
    assert get(gateway, "/hello").json() == {"from": "flask"}


def test_routes_sit_below_the_root_path(log: EventLog) -> None:
    log.append("conv", "Message", {})

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(
            app=Gateway(log=log, allow_anonymous=True), root_path="/app"
        )
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.get(
                "/app/gateway/streams/conv/events", headers={"accept": "application/json"}
            )

    assert [e["seq"] for e in asyncio.run(main()).json()["events"]] == [1]


def test_a_bad_prefix_is_refused(log: EventLog) -> None:
    with pytest.raises(ValueError, match="prefix"):
        Gateway(log=log, prefix="gateway", allow_anonymous=True)


def test_allow_anonymous_warns_at_start_up(log: EventLog, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway_kit"):
        Gateway(log=log)
        assert not caplog.records
        gateway = Gateway(log=log, allow_anonymous=True)
    assert "allow_anonymous" in caplog.text
    assert gateway.allow_anonymous


def test_a_websocket_without_a_wrapped_app_is_closed(log: EventLog) -> None:
    async def main() -> list[Message]:
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        async def receive() -> Message:
            return {"type": "websocket.connect"}

        await Gateway(log=log, allow_anonymous=True)(
            {"type": "websocket", "path": "/ws"}, receive, send
        )
        return sent

    assert asyncio.run(main()) == [{"type": "websocket.close", "code": 1000}]


class Observer:
    """An observer of the wrapped app's traffic: the status of every response it saw."""

    def __init__(self, app: Any, *, seen: list[tuple[str, int]]) -> None:
        self.app = app
        self.seen = seen

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def observed(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.seen.append((scope["path"], message["status"]))
            await send(message)

        await self.app(scope, receive, observed)


@pytest.mark.parametrize("starlette_style", [False, True])
def test_app_middleware_observes_the_wrapped_apps_traffic_only(
    log: EventLog, starlette_style: bool
) -> None:
    log.append("conv", "Message", {}, run_id="task-1")
    seen: list[tuple[str, int]] = []
    middleware = (StarletteMiddleware if starlette_style else Middleware)(Observer, seen=seen)
    gateway = Gateway(
        flask_app(),
        log=log,
        app_middleware=[middleware],
        allow_anonymous=True,
        legacy=LegacySurfaces(tasks="/api/tasks"),
    )
    assert get(gateway, "/hello").status_code == 200
    assert get(gateway, "/api/tasks/task-1").status_code == 200  # served from the log
    assert get(gateway, "/gateway/streams/conv/events", headers={"accept": "application/json"})
    assert get(gateway, "/gateway/nothing").status_code == 404
    assert get(gateway, "/api/tasks/unknown").status_code == 404  # Flask's
    assert seen == [("/hello", 200), ("/api/tasks/unknown", 404)]


def test_the_stack_is_built_in_the_documented_order(log: EventLog) -> None:
    async def socketio(scope: Any, receive: Any, send: Any) -> None:
        pass

    seen: list[tuple[str, int]] = []
    gateway = Gateway(
        flask_app(),
        allow_anonymous=True,
        log=log,
        socketio=socketio,
        app_middleware=[Middleware(Observer, seen=seen)],
        legacy=LegacySurfaces(tasks="/api/tasks"),
    )
    parts, app = [], gateway.stack
    while app is not None:
        parts.append(type(app).__name__)
        app = getattr(app, "app", None) if not isinstance(app, WrappedApp) else None
    assert parts == [
        "Lifespan",  # starts and stops every piece of background work, and serves nothing
        "DatabaseUnavailableAnswer",  # a database that cannot be reached is a 503 everywhere
        "IdentityMiddleware",
        "StreamRoutes",
        "RunRoutes",
        "TicketRoutes",
        "UsageRoutes",
        "HeartbeatRoutes",
        "ApprovalRoutes",
        "Mount",
        "PrefixNotFound",
        "LegacyTaskPoll",
        "Observer",
        "ExecutionObserver",  # nearest the app: it sees the answers as they leave it
        "WrappedApp",
    ]


def test_the_socketio_mount_gets_http_and_websocket_requests_over_a_real_server(
    log: EventLog,
) -> None:
    seen: list[tuple[str, str, str | None]] = []

    async def socketio(scope: Any, receive: Any, send: Any) -> None:
        principal = principal_of(scope)
        seen.append((scope["type"], scope["path"], principal.user_id if principal else None))
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": scope["method"].encode()})
            return
        assert (await receive())["type"] == "websocket.connect"
        await send({"type": "websocket.accept"})
        message = await receive()
        await send({"type": "websocket.send", "text": "echo " + message["text"]})
        await send({"type": "websocket.close", "code": 1000})

    gateway = Gateway(flask_app(), log=log, socketio=socketio, allow_anonymous=True)

    async def main(url: str) -> None:
        async with httpx.AsyncClient(base_url=url) as client:
            polled = await client.get("/gateway/socket.io/", params={"EIO": "4"})
            posted = await client.post("/gateway/socket.io/", params={"EIO": "4"}, content=b"2")
            assert (polled.text, posted.text) == ("GET", "POST")
            assert (await client.get("/hello")).json() == {"from": "flask"}
        ws_url = url.replace("http://", "ws://") + "/gateway/socket.io/?EIO=4&transport=websocket"
        async with connect(ws_url) as websocket:
            await websocket.send("hello")
            assert await websocket.recv() == "echo hello"

    with serve_in_thread(gateway) as url:
        asyncio.run(main(url))
    assert [kind for kind, _, _ in seen] == ["http", "http", "websocket"]
    assert {path for _, path, _ in seen} == {"/gateway/socket.io/"}
    assert {user for _, _, user in seen} == {"anonymous"}  # identity ran first


def test_start_up_names_each_path_of_the_app_the_gateway_answers(
    log: EventLog, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="gateway_kit"):
        Gateway(flask_app(), log=log)
    assert "instead of the app" not in caplog.text  # by default it answers none of them
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="gateway_kit"):
        Gateway(
            flask_app(),
            log=log,
            legacy=LegacySurfaces(tasks="/api/jobs", usage="/api/usage", socketio="/ws"),
        )
    taken = [r.getMessage() for r in caplog.records if "instead of the app" in r.getMessage()]
    assert taken == [
        "gateway_kit answers /api/jobs/<task_id> instead of the app: the task poll, from the log "
        "(legacy surface 'tasks')",
        "gateway_kit answers /api/usage instead of the app: the caller's usage totals "
        "(legacy surface 'usage')",
        "gateway_kit answers /ws instead of the app: Socket.IO, served by the gateway "
        "(legacy surface 'socketio')",
    ]
