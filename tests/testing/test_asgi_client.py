"""`asgi_client`: an app served in-process between its lifespan's start-up and shut-down."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.testing import asgi_client
from gateway_kit.types import Message, Receive, Scope, Send


class Recorder:
    """An ASGI app that notes its lifespan and what it served; `fail` refuses the start-up."""

    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.seen: list[str] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while True:
                message: Message = await receive()
                self.seen.append(message["type"])
                if message["type"] == "lifespan.startup" and self.fail is not None:
                    await send({"type": "lifespan.startup.failed", "message": self.fail})
                    return
                await send({"type": f"{message['type']}.complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        self.seen.append(scope["path"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})


def test_requests_are_served_between_the_start_up_and_the_shut_down() -> None:
    app = Recorder()

    async def main() -> None:
        async with asgi_client(app) as client:
            assert (await client.get("/hello")).text == "ok"
            assert app.seen == ["lifespan.startup", "/hello"]

    asyncio.run(main())
    assert app.seen == ["lifespan.startup", "/hello", "lifespan.shutdown"]


def test_a_failed_start_up_is_raised_with_the_apps_message() -> None:
    async def main() -> None:
        async with asgi_client(Recorder(fail="no database")):
            raise AssertionError("no request is served after a failed start-up")

    with pytest.raises(RuntimeError, match="start-up failed: no database"):
        asyncio.run(main())


def test_a_gateway_is_served_with_its_lifespan(sqlite_url: str) -> None:
    async def main() -> httpx.Response:
        with EventLog(sqlite_url) as log:
            gateway = Gateway(log=log, allow_anonymous=True, load_entry_points=False)
            async with asgi_client(gateway) as client:
                log.append("conv", "Message", {"text": "hi"})
                return await client.get(
                    "/gateway/streams/conv/events", headers={"accept": "application/json"}
                )

    answer = asyncio.run(main())
    assert [e["data"] for e in answer.json()["events"]] == [{"text": "hi"}]
