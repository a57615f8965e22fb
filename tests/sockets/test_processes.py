"""Two gateway processes on one PostgreSQL database, their Socket.IO state shared through
Redis: a client of either gets every event of its streams, presence is the same from both, and
a revoked token loses its sockets on both."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import httpx
import redis

from gateway_kit import EventLog
from gateway_kit.identity.owners import StreamOwners
from gateway_kit.identity.tokens import ApiTokens
from tests.support.processes import gateway_process
from tests.support.socket_clients import connected, with_token
from tests.support.waiting import until

REDIS_URL = os.environ.get("GATEWAY_KIT_TEST_REDIS", "redis://127.0.0.1:6379/0")
MODULE = "tests.sockets.gateway_process"
STREAM = "shared-conv"


def test_two_processes_serve_every_client_alike(pg_url: str, tmp_path: Path) -> None:
    redis.Redis.from_url(REDIS_URL).ping()  # no Redis is a failure, not a skip
    channel = f"gateway-kit-test-{uuid.uuid4().hex[:8]}"
    with EventLog(pg_url) as log:
        StreamOwners(log).declare(STREAM, "alice")
        tokens = ApiTokens(log)
        revoked, token = tokens.create("alice")
        _, kept_token = tokens.create("alice")
        args = (pg_url, REDIS_URL, channel)
        with (
            gateway_process(MODULE, *args, tmp=tmp_path, name="a") as a,
            gateway_process(MODULE, *args, tmp=tmp_path, name="b") as b,
        ):

            async def main() -> None:
                on_a, on_b = with_token(a.url, token), with_token(b.url, kept_token)
                watcher = with_token(a.url, kept_token)
                async with connected(on_a, on_b, watcher):
                    for client in (on_a, on_b):
                        assert await client.subscribe(STREAM) == {"ok": True}
                    # Appended through process b's API and straight into the log alike.
                    async with httpx.AsyncClient(
                        base_url=b.url, headers={"authorization": f"Bearer {token}"}
                    ) as http:
                        page = await http.get(
                            f"/gateway/streams/{STREAM}/events",
                            headers={"accept": "application/json"},
                        )
                        assert page.status_code == 200
                    event = await log.aappend(STREAM, "Message", {"text": "for both"})
                    for client in (on_a, on_b):
                        await client.until(lambda c=client: event.seq in c.seqs(STREAM), "event")
                    # Presence: the same from both processes, and told to the room on both.
                    assert await watcher.subscribe(STREAM) == {"ok": True}
                    await on_b.until(
                        lambda: any(len(p["connections"]) == 3 for p in on_b.presence),
                        "b's client hears of a's new watcher",
                    )
                    shown = []
                    for url in (a.url, b.url):
                        async with httpx.AsyncClient(
                            base_url=url, headers={"authorization": f"Bearer {kept_token}"}
                        ) as http:
                            answer = await http.get(f"/gateway/streams/{STREAM}/presence")
                            shown.append(answer.json())
                    assert shown[0] == shown[1]
                    assert shown[0]["users"] == [{"user_id": "alice", "connections": 3}]
                    # Revoked: its socket on a closes; the other credential's stay, on both.
                    await asyncio.to_thread(tokens.revoke, revoked.token_id)
                    await until(lambda: not on_a.sio.connected, timeout=10)
                    assert on_b.sio.connected and watcher.sio.connected

            asyncio.run(main())
