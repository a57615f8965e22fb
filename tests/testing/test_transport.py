"""Reaching the fake: respx-mocked URLs, the streaming transport itself, and uvicorn."""

from __future__ import annotations

import asyncio

import httpx
import pytest
import respx
import uvicorn

from gateway_kit.testing import FakeGoose, StreamingASGITransport, Turn
from gateway_kit.types import Message, Receive, Scope, Send
from tests.support.waiting import until

from .frames import FAST_PINGS, FrameReader, reply, start_reply


@pytest.mark.parametrize("using", ["httpcore", "httpx"])
def test_a_respx_mocked_url_streams_live_events_incrementally(using: str) -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        release = asyncio.Event()
        fake.script(session_id, Turn().text("first").pause(release).text("second"))
        async with respx.mock(using=using) as router:
            fake.mock(router, base_url="http://goose.test")
            headers = {"X-Secret-Key": fake.secret_key}
            client = httpx.AsyncClient(base_url="http://goose.test", headers=headers)
            async with client, client.stream("GET", f"/sessions/{session_id}/events") as response:
                events = FrameReader(response)
                await start_reply(client, session_id)
                first = await events.next_event()
                # Read while the turn is still paused: the body was not buffered.
                assert first is not None and first.data["message"]["content"][0]["text"]
                assert fake.active_request_ids(session_id) != []
                release.set()
                rest = await events.events_until("Finish")
        texts = [f.data["message"]["content"][0]["text"] for f in [first, *rest[:-1]]]
        assert texts == ["first", "second"]

    asyncio.run(main())


def test_respx_routes_only_the_mocked_origin() -> None:
    async def main() -> None:
        fake = FakeGoose()
        async with respx.mock(assert_all_called=False) as router:
            fake.mock(router, base_url="http://goose.test:3000")
            router.route(host="other.test").respond(418)
            async with httpx.AsyncClient() as client:
                goose = await client.get("http://goose.test:3000/status")
                other = await client.get("http://other.test/status")
        assert (goose.text, other.status_code) == ("ok", 418)

    asyncio.run(main())


def test_closing_the_response_tells_the_app_the_client_left() -> None:
    async def main() -> None:
        seen: list[str] = []

        async def endless(scope: Scope, receive: Receive, send: Send) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"tick", "more_body": True})
            message: Message = await receive()  # the request body
            message = await receive()
            seen.append(message["type"])

        client = httpx.AsyncClient(transport=StreamingASGITransport(endless))
        async with client, client.stream("GET", "http://app.test/") as response:
            assert await anext(response.aiter_bytes()) == b"tick"
        assert seen == ["http.disconnect"]

    asyncio.run(main())


def test_an_app_error_reaches_the_caller() -> None:
    async def main() -> None:
        async def broken(scope: Scope, receive: Receive, send: Send) -> None:
            raise RuntimeError("app failed")

        transport = StreamingASGITransport(broken)
        async with httpx.AsyncClient(transport=transport, base_url="http://app.test") as client:
            with pytest.raises(RuntimeError, match="app failed"):
                await client.get("/")

    asyncio.run(main())


def test_a_reader_that_stops_reading_makes_the_app_wait() -> None:
    async def main() -> None:
        sent: list[int] = []

        async def firehose(scope: Scope, receive: Receive, send: Send) -> None:
            await send({"type": "http.response.start", "status": 200, "headers": []})
            for n in range(100):
                await send({"type": "http.response.body", "body": b"x", "more_body": True})
                sent.append(n)

        client = httpx.AsyncClient(
            transport=StreamingASGITransport(firehose, max_buffered_chunks=3)
        )
        async with client, client.stream("GET", "http://app.test/") as response:
            await anext(response.aiter_bytes())
            for _ in range(5):
                await asyncio.sleep(0)  # give the app every chance to run ahead
            assert len(sent) < 10

    asyncio.run(main())


def test_it_runs_under_uvicorn() -> None:
    async def main() -> None:
        fake = FakeGoose(ping_interval=FAST_PINGS)
        session_id = fake.create_session()
        config = uvicorn.Config(fake, host="127.0.0.1", port=0, log_level="warning")
        server = uvicorn.Server(config)
        serving = asyncio.create_task(server.serve())
        await until(lambda: server.started)
        port = server.servers[0].sockets[0].getsockname()[1]
        headers = {"X-Secret-Key": fake.secret_key}
        base_url = f"http://127.0.0.1:{port}"
        try:
            async with httpx.AsyncClient(base_url=base_url, headers=headers) as client:
                assert (await reply(client, "nope")).status_code == 404
                async with client.stream("GET", f"/sessions/{session_id}/events") as response:
                    events = FrameReader(response)
                    request_id = await start_reply(client, session_id, "over the wire")
                    frames = await events.events_until("Finish")
        finally:
            server.should_exit = True
            await serving
        assert {f.data["chat_request_id"] for f in frames} == {request_id}

    asyncio.run(main())
