"""The messages an event makes besides its ``event`` message (`extra_events`): the legacy
clients' approval messages, live and in a replay, each right after the event it comes of; and
a translator that fails costs those messages only."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from gateway_kit import EventLog, Gateway
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.serving import serve_in_thread
from tests.support.socket_clients import Client, connected, with_token

STREAM = "alice-conv"
APPROVAL = {
    "approval_id": "apr_" + "c" * 32,
    "kind": "tool_confirmation",
    "stream": STREAM,
    "tool_name": "shell",
    "arguments": {"command": "ls"},
    "args_hash": "d" * 64,
    "prompt": None,
    "status": "pending",
    "expires_at": 2000.0,
    "decided_by": None,
    "reason": None,
    "closed_reason": None,
}
DECIDED = {**APPROVAL, "status": "approved", "decided_by": "alice"}
LEGACY = ("tool_approval_required", "tool_approval_resolved")


@pytest.fixture
def served(sqlite_url: str) -> Iterator[tuple[str, EventLog, Gateway, str]]:
    log = EventLog(sqlite_url)
    StreamOwners(log).declare(STREAM, "alice")
    _, token = ApiTokens(log).create("alice")
    gateway = Gateway(log=log, load_entry_points=False)
    try:
        with serve_in_thread(gateway) as base:
            yield base, log, gateway, token
    finally:
        log.close()


def legacy_client(base: str, token: str) -> tuple[Client, list[tuple[str, Any]]]:
    """A client that keeps, in order, its events' types and the legacy messages it gets."""
    client = with_token(base, token)
    received: list[tuple[str, Any]] = []

    @client.sio.on("event")
    async def on_event(envelope: dict[str, Any]) -> None:
        received.append(("event", envelope["type"]))
        client.changed.set()

    for name in LEGACY:

        async def keep(payload: Any, name: str = name) -> None:
            received.append((name, payload.get("status")))
            client.changed.set()

        client.sio.on(name, keep)
    return client, received


async def write_approval_events(log: EventLog) -> None:
    await log.aappend(STREAM, "approval_requested", APPROVAL)
    await log.aappend(STREAM, "Message", {"text": "meanwhile"})
    await log.aappend(STREAM, "approval_decided", DECIDED)


EXPECTED = [
    ("event", "approval_requested"),
    ("tool_approval_required", None),
    ("event", "Message"),
    ("event", "approval_decided"),
    ("tool_approval_resolved", "approved"),
]


def test_a_subscriber_gets_the_legacy_messages_live_and_in_a_replay(
    served: tuple[str, EventLog, Gateway, str],
) -> None:
    base, log, _, token = served

    async def main() -> None:
        live, live_received = legacy_client(base, token)
        late, late_received = legacy_client(base, token)
        async with connected(live, late):
            assert await live.subscribe(STREAM) == {"ok": True}
            await write_approval_events(log)
            await live.until(lambda: len(live_received) == len(EXPECTED), "the live messages")
            assert await late.subscribe(STREAM, after=0) == {"ok": True}  # all of it a replay
            await late.until(lambda: len(late_received) == len(EXPECTED), "the replay")
        assert live_received == EXPECTED
        assert late_received == EXPECTED

    asyncio.run(main())


def test_a_failing_translator_costs_its_messages_only(
    served: tuple[str, EventLog, Gateway, str], caplog: pytest.LogCaptureFixture
) -> None:
    base, log, gateway, token = served
    assert gateway.sockets is not None

    def broken(envelope: Any) -> list[tuple[str, Any]]:
        raise RuntimeError("a translator that fails")

    gateway.sockets.rooms.extra_events = broken

    async def main() -> None:
        client, received = legacy_client(base, token)
        async with connected(client):
            assert await client.subscribe(STREAM) == {"ok": True}
            await write_approval_events(log)
            await log.aappend(STREAM, "Message", {"text": "still delivered"})
            await client.until(lambda: len(received) == 4, "every event")
            assert client.sio.connected
        assert received == [e for e in EXPECTED if e[0] == "event"] + [("event", "Message")]

    asyncio.run(main())
    assert "extra messages of event" in caplog.text
