"""Serving `GET /sessions/{id}/events` the way goosed frames it.

Frames are `id: <n>\\ndata: <json>\\n\\n` with no `event:` line. Two frames deliberately carry no
reply request id: the `ActiveRequests` frame sent first (and without an `id:` line, so it cannot
move the client's cursor) and the `id: 0` "too far behind" error. Pings are comments.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any

from gateway_kit.types import JSONObject, Receive, Send

from .bus import TOO_FAR_BEHIND_ERROR, BusEvent, SessionBus, Subscription, TooFarBehind

SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
]


def _json(payload: JSONObject) -> str:
    # serde_json's compact form, non-ASCII kept as UTF-8.
    return json.dumps(payload, ensure_ascii=False, separators=(",", ":"))


def event_frame(event: BusEvent) -> bytes:
    return event.frame


def _anonymous_frame(payload: JSONObject) -> bytes:
    return f"data: {_json(payload)}\n\n".encode()


async def _body(send: Send, chunk: bytes, *, more: bool = True) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": more})


async def serve_events(
    bus: SessionBus,
    last_event_id: int | None,
    receive: Receive,
    send: Send,
    *,
    ping_interval: float,
) -> None:
    try:
        replay, subscription = bus.subscribe(last_event_id)
    except TooFarBehind:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        error = {"type": "Error", "error": TOO_FAR_BEHIND_ERROR}
        await _body(send, f"id: 0\ndata: {_json(error)}\n\n".encode(), more=False)
        return
    try:
        await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS})
        active = bus.active_request_ids()
        if active:
            await _body(send, _anonymous_frame({"type": "ActiveRequests", "request_ids": active}))
        if replay:  # what is buffered goes out at once, as fast as the connection takes it
            await _body(send, b"".join(event_frame(event) for event in replay))
        if await _race(_live(subscription, send, ping_interval), _disconnected(receive)):
            await _body(send, b"", more=False)  # the stream ended on goose's side
    except OSError:
        pass  # the client went away while we were sending
    finally:
        bus.unsubscribe(subscription)


async def _race(live: Coroutine[Any, Any, None], disconnect: Coroutine[Any, Any, None]) -> bool:
    """Run both until the first ends; True when the live side ended (not the client)."""
    live_task = asyncio.create_task(live)
    disconnect_task = asyncio.create_task(disconnect)
    try:
        await asyncio.wait({live_task, disconnect_task}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (live_task, disconnect_task):
            task.cancel()
        await asyncio.gather(live_task, disconnect_task, return_exceptions=True)
    if live_task.cancelled():
        return False
    live_task.result()  # re-raise a failure to send
    return True


async def _live(subscription: Subscription, send: Send, ping_interval: float) -> None:
    """Live events and `: ping N` comments; returns when goose closes the subscription."""
    loop = asyncio.get_running_loop()
    pings = 0
    next_ping = loop.time()  # goose's first ping goes out at once
    while True:
        wait = next_ping - loop.time()
        if wait <= 0:
            await _body(send, f": ping {pings}\n\n".encode())
            pings += 1
            next_ping = max(next_ping + ping_interval, loop.time())
            continue
        try:
            event = await asyncio.wait_for(subscription.next(), timeout=wait)
        except TimeoutError:
            continue
        if event is None:
            return
        await _body(send, event_frame(event))


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
