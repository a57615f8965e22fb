"""The demo's legacy ``/socket.io`` behind the gateway: served by the gateway's own Socket.IO
server in the event loop, so long polls there hold none of Flask's threads, and a legacy client
connects at its old path with the token the old endpoint gives it."""

from __future__ import annotations

import asyncio
import json

import httpx

from gateway_kit.demo.gateway import build_demo
from gateway_kit.settings import DEFAULT_WSGI_WORKERS
from tests.support.serving import serve_in_thread

from .legacy_clients import connect

LONG_POLLS = DEFAULT_WSGI_WORKERS + 5
FLASK_ANSWER_BOUND = 5.0  # seconds: generous for a page Flask answers at once
POLLING = {"EIO": "4", "transport": "polling"}


async def long_poll(client: httpx.AsyncClient, opened: asyncio.Event) -> None:
    """An Engine.IO client by long-polling (no credential needed for that), as a browser's:
    each poll waits for the server's next packet, a ping is answered, and it polls again."""
    handshake = await client.get("/socket.io/", params=POLLING)
    assert handshake.status_code == 200, handshake.text
    params = {**POLLING, "sid": json.loads(handshake.text[1:])["sid"]}  # "0" + the open packet
    opened.set()
    while True:
        packets = (await client.get("/socket.io/", params=params)).text
        if "2" in packets.split("\x1e"):
            await client.post("/socket.io/", params=params, content=b"3")  # the pong


def test_legacy_long_polls_hold_no_flask_thread_and_old_clients_connect(sqlite_url: str) -> None:
    demo = build_demo(sqlite_url)

    async def main(base: str) -> None:
        limits = httpx.Limits(max_connections=LONG_POLLS + 1)
        async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as polls:
            opened = [asyncio.Event() for _ in range(LONG_POLLS)]
            pending = [asyncio.create_task(long_poll(polls, event)) for event in opened]
            for event in opened:
                await event.wait()
            async with httpx.AsyncClient(base_url=base, timeout=FLASK_ANSWER_BOUND) as user:
                # More long polls wait than Flask has threads; Flask still answers at once.
                assert (await user.get("/login")).status_code == 200
                answer = await user.post("/login", json={"username": "demo", "password": "demo"})
                assert answer.status_code == 200, answer.text
                # A cookie asks for a socket token with its session's CSRF token.
                csrf = {"X-CSRF-Token": answer.json()["csrf_token"]}
                token = (await user.get("/api/socket-token", headers=csrf)).json()["token"]
                refusal = await connect(base, "socket.io", {"token": token}, user.cookies)
                assert refusal is None  # connected at the legacy path, with the legacy token
            assert not any(task.done() for task in pending)  # all still polling
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    try:
        # The server's side of a long poll a client left ends at its ping only: not waited for.
        with serve_in_thread(demo, timeout_graceful_shutdown=1) as base:
            asyncio.run(main(base))
    finally:
        demo.log.close()
