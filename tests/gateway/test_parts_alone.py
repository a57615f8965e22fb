"""Each part of the stack on its own, around a Starlette or a FastAPI application."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
import respx
from fastapi import FastAPI
from starlette.applications import Starlette
from starlette.requests import Request as StarletteRequest
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount as StarletteMount
from starlette.routing import Route

from gateway_kit import (
    EventLog,
    GooseUpstream,
    IdentityMiddleware,
    LegacyTaskPoll,
    Mount,
    Plugins,
    Principal,
    RunRoutes,
    StreamRoutes,
)
from gateway_kit.http.lifespan import Lifespan, Work
from gateway_kit.principal import principal_of
from gateway_kit.runs.lifecycle import RunLifecycle
from gateway_kit.runs.service import RunService
from gateway_kit.runs.store import RunStore
from gateway_kit.streams import StreamService
from gateway_kit.testing import FakeGoose
from gateway_kit.types import Receive, Scope, Send
from gateway_kit.upstream.goose.pumps import PumpManager
from tests.support.asgi_driver import Request
from tests.support.plugins import plugin
from tests.support.upstream import FAST, GOOSE_URL, until

JSON = {"accept": "application/json"}


def fastapi_app(started: list[str] | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if started is not None:
            started.append("up")
        yield

    app = FastAPI(lifespan=lifespan)

    @app.get("/hello")
    def hello() -> dict[str, str]:
        return {"from": "fastapi"}

    @app.get("/api/tasks/{task_id}")
    def own_task(task_id: str) -> dict[str, str]:
        return {"task_id": task_id, "served_by": "fastapi"}

    return app


def starlette_app() -> Starlette:
    async def whoami(request: StarletteRequest) -> JSONResponse:
        principal = principal_of(request.scope)
        return JSONResponse({"user": principal.user_id if principal else None})

    return Starlette(
        routes=[Route("/whoami", whoami), Route("/hello", lambda r: PlainTextResponse("hi"))]
    )


async def client_for(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app.test")


def builtins() -> Plugins:
    return Plugins(load_entry_points=False)


def test_stream_routes_around_a_fastapi_app(log: EventLog) -> None:
    log.append("conv", "Message", {"text": "hi"})
    started: list[str] = []
    plugins = builtins()
    alone = StreamRoutes(fastapi_app(started), log=log, plugins=plugins)
    app = IdentityMiddleware(alone, plugins=plugins, allow_anonymous=True)

    async def main() -> None:
        async with await client_for(alone) as client:
            # Without an identity stage in front, nobody is anybody: reads need credentials.
            refused = await client.get("/gateway/streams/conv/events", headers=JSON)
            assert refused.status_code == 401 and refused.json()["error"] == "unauthenticated"
        async with await client_for(app) as client:
            assert (await client.get("/hello")).json() == {"from": "fastapi"}
            page = (await client.get("/gateway/streams/conv/events", headers=JSON)).json()
            assert [e["data"] for e in page["events"]] == [{"text": "hi"}]
            # Not one of its routes: FastAPI answers (its own 404), not the stream routes.
            assert (await client.get("/gateway/elsewhere")).json() == {"detail": "Not Found"}

    asyncio.run(main())


def test_stream_routes_pass_the_lifespan_on_and_watch_it(log: EventLog) -> None:
    started: list[str] = []
    plugins = builtins()
    # Made from the log alone, its stream service is its own: nobody else could end its streams.
    app = StreamRoutes(fastapi_app(started), log=log, plugins=plugins)
    sent = asyncio.run(through_lifespan(app))
    assert started == ["up"]
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]

    async def after_shutdown() -> int | None:
        anonymous = IdentityMiddleware(app, plugins=plugins, allow_anonymous=True)
        request = await Request(anonymous, "/gateway/streams/conv/events").run()
        return request.status

    assert asyncio.run(after_shutdown()) == 503  # its streams stopped with the app


def test_identity_around_a_starlette_app_puts_the_principal_in_the_scope(log: EventLog) -> None:
    def by_header(scope: Scope) -> Principal | None:
        user = dict(scope["headers"]).get(b"x-user")
        return Principal(user.decode(), "header") if user else None

    plugins = Plugins([plugin("header-sso", resolve_principal=by_header)], load_entry_points=False)
    app = IdentityMiddleware(starlette_app(), plugins=plugins)
    open_app = IdentityMiddleware(starlette_app(), plugins=plugins, allow_anonymous=True)

    async def main() -> None:
        async with await client_for(app) as client:
            assert (await client.get("/whoami", headers={"x-user": "ada"})).json() == {
                "user": "ada"
            }
            assert (await client.get("/whoami")).json() == {"user": None}  # the app decides
        async with await client_for(open_app) as client:
            assert (await client.get("/whoami")).json() == {"user": "anonymous"}

    asyncio.run(main())


def test_the_legacy_poll_around_a_fastapi_app(log: EventLog) -> None:
    log.append("conv", "Message", {"text": "from the log"}, run_id="task-1")
    plugins = builtins()
    app = IdentityMiddleware(
        LegacyTaskPoll(fastapi_app(), log=log, plugins=plugins),
        plugins=plugins,
        allow_anonymous=True,
    )

    async def main() -> None:
        async with await client_for(app) as client:
            known = (await client.get("/api/tasks/task-1", params={"from": 0})).json()
            assert [e["data"] for e in known["events"]] == [{"text": "from the log"}]
            unknown = (await client.get("/api/tasks/task-2")).json()
            assert unknown == {"task_id": "task-2", "served_by": "fastapi"}

    asyncio.run(main())


def test_a_mount_around_a_starlette_app(log: EventLog) -> None:
    seen: list[tuple[str, str]] = []

    async def sub(scope: Scope, receive: Receive, send: Send) -> None:
        seen.append((scope["type"], scope["path"]))
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"mounted"})

    app = Mount(starlette_app(), path="/gateway/socket.io", mounted=sub)

    async def main() -> None:
        async with await client_for(app) as client:
            assert (await client.get("/gateway/socket.io/", params={"EIO": "4"})).text == "mounted"
            assert (await client.post("/gateway/socket.io")).text == "mounted"
            assert (await client.get("/gateway/socket.iox")).status_code == 404  # Starlette's
            assert (await client.get("/hello")).text == "hi"

    asyncio.run(main())
    assert seen == [("http", "/gateway/socket.io/"), ("http", "/gateway/socket.io")]


def test_the_run_api_around_a_starlette_app(log: EventLog) -> None:
    fake = FakeGoose(ping_interval=0.05)

    async def main() -> None:
        goose_client = httpx.AsyncClient()
        with respx.mock(assert_all_called=False) as router:
            fake.mock(router, base_url=GOOSE_URL)
            router.route(host="app.test").pass_through()
            upstream = GooseUpstream(
                base_url=GOOSE_URL, secret_key=fake.secret_key, client=goose_client
            )
            store = RunStore(log)
            plugins = builtins()
            # One lifecycle, handed to both: one set of per-run locks decides how a run ends.
            lifecycle = RunLifecycle(log=log, store=store, upstream=upstream, plugins=plugins)
            pumps = PumpManager(
                log=log, store=store, upstream=upstream, settings=FAST, lifecycle=lifecycle
            )
            service = RunService(
                log=log, store=store, upstream=upstream, pumps=pumps, lifecycle=lifecycle
            )
            app = IdentityMiddleware(
                RunRoutes(starlette_app(), service=service, plugins=plugins),
                plugins=plugins,
                allow_anonymous=True,
            )
            try:
                async with await client_for(app) as client:
                    assert (await client.get("/hello")).text == "hi"
                    started = await client.post(
                        "/gateway/streams/conv/runs", json={"message": "hi"}
                    )
                    run_id = started.json()["run_id"]
                    await until(lambda: not store.get(run_id).active)  # type: ignore[union-attr]
                    shown = (await client.get(f"/gateway/runs/{run_id}")).json()
                    assert shown["status"] == "finished"
            finally:
                await pumps.stop()
                await lifecycle.stop()
                await goose_client.aclose()

    asyncio.run(main())
    assert [e.type for e in log.read(stream="conv")][-1] == "Finish"


def test_a_stack_composed_by_hand_like_the_readme_shows(log: EventLog) -> None:
    log.append("conv", "Message", {"text": "hi"})
    plugins = Plugins(load_entry_points=False)
    app = IdentityMiddleware(
        StreamRoutes(fastapi_app(), log=log, plugins=plugins),
        plugins=plugins,
        allow_anonymous=True,
    )

    async def main() -> None:
        async with await client_for(app) as client:
            response = await client.get("/gateway/streams/conv/events", headers=JSON)
            assert json.loads(response.text)["events"][0]["data"] == {"text": "hi"}

    asyncio.run(main())


def test_a_part_mounted_below_a_starlette_router_sees_its_own_root_path(log: EventLog) -> None:
    log.append("conv", "Message", {"text": "hi"})
    plugins = builtins()
    inner = StreamRoutes(starlette_app(), log=log, plugins=plugins)
    # An outer part reads the path first, relative to the server's root; Starlette's Mount then
    # moves the root below /api, and the inner part must read the path relative to that.
    app = IdentityMiddleware(
        RunRoutes(
            Starlette(routes=[StarletteMount("/api", app=inner)]), service=None, plugins=plugins
        ),
        plugins=plugins,
        allow_anonymous=True,
    )

    async def main() -> None:
        async with await client_for(app) as client:
            page = await client.get("/api/gateway/streams/conv/events", headers=JSON)
            assert page.status_code == 200, page.text
            assert [e["data"] for e in page.json()["events"]] == [{"text": "hi"}]

    asyncio.run(main())


def test_a_part_used_alone_says_what_it_was_not_handed(log: EventLog) -> None:
    with pytest.raises(TypeError, match=r"StreamRoutes needs service= .* or log="):
        StreamRoutes(fastapi_app(), plugins=builtins())
    with pytest.raises(TypeError, match=r"LegacyTaskPoll needs service= .* or log="):
        LegacyTaskPoll(fastapi_app(), plugins=builtins())
    with pytest.raises(TypeError, match="plugins"):
        RunRoutes(fastapi_app(), service=None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="plugins"):
        IdentityMiddleware(fastapi_app())  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="lifecycle"):
        PumpManager(log=log, store=RunStore(log), upstream=None)  # type: ignore[call-arg,arg-type]


async def through_lifespan(app: Any) -> list[str]:
    """Take `app` through a server's start-up and shutdown; the answers it sent."""
    sent: list[str] = []
    inbox: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    for kind in ("lifespan.startup", "lifespan.shutdown"):
        inbox.put_nowait({"type": kind})

    async def send(message: Any) -> None:
        sent.append(message["type"])

    await asyncio.wait_for(
        app({"type": "lifespan", "asgi": {"version": "3.0"}}, inbox.get, send), 10
    )
    return sent


def recorded(name: str, done: list[str], *, on_request: bool = True) -> Work:
    async def start() -> None:
        done.append(f"start {name}")

    async def stop() -> None:
        done.append(f"stop {name}")

    return Work(name, start, stop, on_request=on_request)


def test_one_lifespan_part_on_top_of_a_hand_built_stack_starts_and_stops_the_work(
    log: EventLog,
) -> None:
    log.append("conv", "Message", {"text": "hi"})
    plugins = builtins()
    service = StreamService(log)
    done: list[str] = []
    stack = IdentityMiddleware(
        StreamRoutes(fastapi_app(), service=service, plugins=plugins),
        plugins=plugins,
        allow_anonymous=True,
    )
    app = Lifespan(
        stack,
        work=[
            recorded("sweeper", done),
            Work("streams", service.startup, service.shutdown, on_request=False),
        ],
    )

    async def main() -> None:
        sent = await through_lifespan(app)
        assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
        assert done == ["start sweeper", "stop sweeper"]
        # The part on top closed the service's streams; a request served after the shutdown
        # (one still in flight) starts nothing again.
        after = await Request(app, "/gateway/streams/conv/events").run()
        assert after.status == 503
        assert done == ["start sweeper", "stop sweeper"]

    asyncio.run(main())


def test_without_a_lifespan_the_first_request_starts_the_work_once(log: EventLog) -> None:
    done: list[str] = []
    app = Lifespan(
        starlette_app(),
        work=[recorded("pumps", done), recorded("reopen", done, on_request=False)],
    )

    async def main() -> None:
        async with await client_for(app) as client:
            for _ in range(3):
                assert (await client.get("/hello")).text == "hi"

    asyncio.run(main())
    assert done == ["start pumps"]
